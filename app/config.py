"""Configuration: `OMNI_*` environment variables over one optional config file (`OMNI_CONFIG`).

The file is TOML (`.toml`) or JSON with the same keys in lower case and without the prefix
(`models = ["exports/english"]`, `profile = "jev"`). Environment variables win over the file.
Every key is documented in docs/configuration.md.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

PROFILES = ("reference", "jev")
LOG_FORMATS = ("text", "json")
GDN_PLANS = ("auto", "chunked", "chunked_split", "recurrent")


@dataclass(frozen=True)
class Settings:
    models: tuple[str, ...] = ()            # exported model directories (or names under model_root)
    model_root: str | None = None           # where bare model names are looked up
    default_model: str | None = None        # what `jev-latest` and a missing `model` mean
    device: str = "auto"                    # auto | cpu | cuda | cuda:N
    profile: str = "reference"              # default response profile
    api_key: str | None = None              # bearer token required on /v1/* when set
    max_body_bytes: int = 8 * 1024 * 1024   # checked from Content-Length, then while reading
    max_decompressed_bytes: int = 32 * 1024 * 1024
    max_body_values: int = 1 << 18         # JSON values in one body (arrays, objects, items)
    body_timeout_s: float = 10.0            # a body slower than this is 408
    request_timeout_s: float = 30.0         # queue + inference budget, else 504
    queue_size: int = 1024                  # requests waiting for the executor, else 503
    max_batch_rows: int = 256               # rows of one forward pass
    max_batch_tokens: int = 131072          # rows x padded length of one forward pass
    batch_window_ms: float = 0.0            # optional wait for more work before a batch
    intra_op_threads: int = 0               # ONNX Runtime CPU threads (0: its default)
    retry_after_s: int = 1                  # Retry-After on 503 overloaded / not_ready
    warmup_requests: int = 1                # full-path warm-up requests per model before ready
    fatal_after_failures: int = 3           # consecutive failed batches that take a model out
    cuda_graphs: int = 320                  # CUDA graphs per ORT session at most; 0: off
    cuda_graph_rows: int = 64               # larger batches run uncaptured at their own shapes
    # Capture, as a model loads, every shape its graph policy lists, so no request waits for a
    # capture; off: each shape is captured when traffic first brings it (a faster start).
    cuda_graph_precapture: bool = True
    # ONNX Runtime's GatedDeltaNet engine for the Qwen3.5 families (ORT_GDN_PLAN): chunked_split
    # is fastest for a few rows a pass, auto (ORT's heuristic) for many rows a pass.
    cuda_gdn_plan: str = "chunked_split"
    log_format: str = "text"                # text | json (one JSON object a line)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.profile not in PROFILES:
            raise ValueError("profile must be one of %s, got %r" % (PROFILES, self.profile))
        if self.log_format not in LOG_FORMATS:
            raise ValueError("log_format must be one of %s, got %r" % (LOG_FORMATS, self.log_format))
        if self.cuda_gdn_plan not in GDN_PLANS:
            raise ValueError("cuda_gdn_plan must be one of %s, got %r" % (GDN_PLANS, self.cuda_gdn_plan))
        for name in ("max_body_bytes", "max_body_values", "queue_size", "max_batch_rows", "max_batch_tokens",
                     "warmup_requests", "fatal_after_failures"):
            if getattr(self, name) <= 0:
                raise ValueError("%s must be positive" % name)

    def model_dirs(self) -> list[str]:
        """`models` with bare names (no path separator) resolved under `model_root`."""
        return [os.path.join(self.model_root, m) if self.model_root and os.sep not in m else m
                for m in self.models]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        path = env.get("OMNI_CONFIG")
        if path:
            values.update(_read_file(path))
        for f in fields(cls):
            if f.name == "extra":
                continue
            raw = env.get("OMNI_" + f.name.upper())
            if raw is not None and raw != "":
                values[f.name] = raw
        return cls(**{k: _coerce(k, v) for k, v in values.items() if k in _FIELD_TYPES})


_FIELD_TYPES = {f.name: f.type for f in fields(Settings)}


def _read_file(path: str) -> dict[str, Any]:
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".toml"):
        import tomllib

        return tomllib.loads(data.decode("utf-8"))
    return json.loads(data)


_BOOLS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def _coerce(name: str, value: Any) -> Any:
    kind = _FIELD_TYPES[name]
    if name == "models":
        if isinstance(value, str):
            parts = [p.strip() for chunk in value.split(",") for p in chunk.split(os.pathsep)]
            return tuple(p for p in parts if p)
        return tuple(value)
    if kind == "bool":
        if isinstance(value, str):
            if value.strip().lower() not in _BOOLS:
                raise ValueError("OMNI_%s must be one of %s, got %r" % (name.upper(), "/".join(_BOOLS), value))
            return _BOOLS[value.strip().lower()]
        return bool(value)
    if "int" in kind and not isinstance(value, bool):
        return int(value)
    if "float" in kind:
        return float(value)
    if value == "" and "None" in kind:
        return None
    return value
