"""Configuration: `OMNI_*` environment variables over one optional config file (`OMNI_CONFIG`).

The file is TOML (`.toml`) or JSON with the same keys in lower case and without the prefix
(`models = ["exports/english"]`, `profile = "jev"`). Environment variables win over the file.
Every key is documented in docs/configuration.md. A value that is not valid, an unknown key in
the file and an unknown `OMNI_*` variable are refused with a `ConfigError` naming them.
"""
from __future__ import annotations

import difflib
import json
import math
import os
import re
from dataclasses import dataclass, fields
from typing import Any, Mapping

PROFILES = ("reference", "jev")
LOG_FORMATS = ("text", "json")
GDN_PLANS = ("auto", "chunked", "chunked_split", "recurrent")
# `OMNI_*` variables that other parts of the project read (the export image, `make serve`, compose,
# the image test): the server accepts them in its environment and ignores them.
OTHER_VARIABLES = frozenset({
    "OMNI_CONFIG", "OMNI_DEMO_DIR", "OMNI_EXPORT_DTYPE", "OMNI_LAYA_EXPORT_DTYPE", "OMNI_GDN_KERNEL",
    "OMNI_REVISION", "OMNI_VERSION", "OMNI_BASE_IMAGE", "OMNI_TEST_DEMO", "OMNI_CI_CACHE",
})
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")


class ConfigError(ValueError):
    """A setting the server cannot start with; the message names it and says what it takes."""


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
    # A forward pass or CUDA graph capture running longer than this is taken as hung: /livez fails
    # so the orchestrator restarts the server. Passes are also held to a bound from the model's own
    # pass times, below this ceiling; raise it for large models on CPUs, whose passes take minutes.
    pass_timeout_s: float = 120.0
    cuda_graphs: int = 320                  # CUDA graphs per ORT session at most; 0: off
    cuda_graph_rows: int = 64               # larger batches run uncaptured at their own shapes
    # Spend a few seconds of a model's load capturing the shapes its graph policy lists; the rest
    # are captured when idle. Off: every shape is left to idle time (a faster start).
    cuda_graph_precapture: bool = True
    # ONNX Runtime's GatedDeltaNet engine for the Qwen3.5 families (ORT_GDN_PLAN): chunked_split
    # is fastest for a few rows a pass, auto (ORT's heuristic) for many rows a pass.
    cuda_gdn_plan: str = "chunked_split"
    log_format: str = "text"                # text | json (one JSON object a line)

    def __post_init__(self):
        for name, check in _CHECKS.items():
            check(getattr(self, name), _env_name(name))

    def model_dirs(self) -> list[str]:
        """`models` with bare names (no path separator) resolved under `model_root`. An entry
        `name=source` (the export service's syntax) is the export it wrote: `name`."""
        names = [m.split("=", 1)[0].strip() if "=" in m else m for m in self.models]
        return [os.path.join(self.model_root, m) if self.model_root and os.sep not in m else m for m in names]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        path = env.get("OMNI_CONFIG")
        if path:
            data = _read_file(path)
            unknown = sorted(set(data) - set(_FIELD_TYPES))
            if unknown:
                raise ConfigError("unknown key%s in OMNI_CONFIG=%s: %s" % (
                    "s" if len(unknown) > 1 else "", path, _suggest(unknown, sorted(_FIELD_TYPES))))
            for key, value in data.items():
                values[key] = _coerce(key, value, "key %r in %s" % (key, path))
        unknown = sorted(k for k in env if k.startswith("OMNI_") and k not in _ENV_NAMES and k not in OTHER_VARIABLES)
        if unknown:
            raise ConfigError("unknown variable%s %s; the settings are in docs/configuration.md" % (
                "s" if len(unknown) > 1 else "", _suggest(unknown, sorted(_ENV_NAMES))))
        for name in _FIELD_TYPES:
            raw = env.get(_env_name(name))
            if raw is not None and raw != "":
                values[name] = _coerce(name, raw, _env_name(name))
        return cls(**values)


def _env_name(name: str) -> str:
    return "OMNI_" + name.upper()


_FIELD_TYPES = {f.name: f.type for f in fields(Settings)}
_ENV_NAMES = frozenset(_env_name(n) for n in _FIELD_TYPES)


def _suggest(unknown: list[str], known: list[str]) -> str:
    """`OMNI_QEUE_SIZE (did you mean OMNI_QUEUE_SIZE?)`, one for each unknown name."""
    out = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        out.append("%s (did you mean %s?)" % (name, close[0]) if close else name)
    return ", ".join(out)


def _read_file(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ConfigError("OMNI_CONFIG=%s cannot be read: %s" % (path, exc.strerror or exc)) from None
    try:
        if path.endswith(".toml"):
            import tomllib

            parsed = tomllib.loads(data.decode("utf-8"))
        else:
            parsed = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError("OMNI_CONFIG=%s is not valid %s: %s" % (
            path, "TOML" if path.endswith(".toml") else "JSON", exc)) from None
    if not isinstance(parsed, dict):
        raise ConfigError("OMNI_CONFIG=%s must hold an object of settings" % path)
    return parsed


_BOOLS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def _split_models(value: str) -> tuple[str, ...]:
    """Entries separated by `,` or `:`; a `name=source` entry keeps the `:` of its source."""
    parts: list[str] = []
    for chunk in value.split(","):
        parts.extend([chunk] if "=" in chunk else chunk.split(os.pathsep))
    return tuple(p.strip() for p in parts if p.strip())


def _coerce(name: str, value: Any, label: str) -> Any:
    """`value` (a string from the environment, or a file's value) as field `name` takes it;
    `label` names where it came from in the error."""
    kind = _FIELD_TYPES[name]
    if name == "models":
        if isinstance(value, str):
            return _split_models(value)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(v.strip() for v in value if v.strip())
        raise ConfigError("%s must be a list of export directories, got %r" % (label, value))
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _BOOLS:
            return _BOOLS[value.strip().lower()]
        raise ConfigError("%s must be one of %s, got %r" % (label, "/".join(_BOOLS), value))
    if kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise ConfigError("%s must be a whole number, got %r" % (label, value))
    if kind == "float":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise ConfigError("%s must be a number, got %r" % (label, value))
    if (value is None or value == "") and "None" in kind:
        return None
    if not isinstance(value, str):
        raise ConfigError("%s must be a string, got %r" % (label, value))
    return value


def _at_least(low: float):
    def check(value, label):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < low:
            raise ConfigError("%s must be %s, got %r" % (
                label, "a positive number" if low > 0 else "0 or more", value))
    return check


def _above_zero(value, label):
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise ConfigError("%s must be a number above 0, got %r" % (label, value))


def _one_of(choices):
    def check(value, label):
        if value not in choices:
            raise ConfigError("%s must be one of %s, got %r" % (label, ", ".join(choices), value))
    return check


def _device(value, label):
    if not isinstance(value, str) or not _DEVICE.fullmatch(value):
        raise ConfigError("%s must be auto, cpu, cuda or cuda:N, got %r" % (label, value))


_CHECKS = {
    "device": _device, "profile": _one_of(PROFILES), "cuda_gdn_plan": _one_of(GDN_PLANS),
    "log_format": _one_of(LOG_FORMATS),
    **{name: _at_least(1) for name in ("max_body_bytes", "max_decompressed_bytes", "max_body_values", "queue_size",
                                       "max_batch_rows", "max_batch_tokens", "warmup_requests",
                                       "retry_after_s", "cuda_graph_rows")},
    **{name: _at_least(0) for name in ("batch_window_ms", "intra_op_threads", "cuda_graphs")},
    **{name: _above_zero for name in ("body_timeout_s", "request_timeout_s", "pass_timeout_s")},
}
