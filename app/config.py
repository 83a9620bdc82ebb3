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

from app.runtime import cuda_sync

PROFILES = ("reference", "jev")


GDN_PLANS = ("auto", "chunked", "chunked_split", "recurrent")
CUDA_SYNC_MODES = tuple(cuda_sync.MODES)


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
    body_timeout_s: float = 10.0            # a body slower than this is 408
    request_timeout_s: float = 30.0         # queue + inference budget, else 504
    # A request still queued this long is watched for its client leaving (then dropped unrun, 499).
    # A watcher costs the loop a task and a receive() per request; at 1 ms every request of Laya at
    # c=64 (queue p50 ~1.5 ms) had one, and 10 ms served 3-9% more (H200, 2026-11-30 row buckets).
    disconnect_watch_ms: float = 10.0
    queue_size: int = 1024                  # requests waiting for the executor, else 503
    max_batch_rows: int = 256               # rows of one forward pass
    max_batch_tokens: int = 131072          # rows x padded length of one forward pass
    batch_window_ms: float = 0.0            # optional wait for more work before a batch
    intra_op_threads: int = 0               # ONNX Runtime CPU threads (0: its default)
    retry_after_s: int = 1                  # Retry-After on 503 overloaded / not_ready
    warmup_requests: int = 1                # full-path warm-up requests per model before ready
    fatal_after_failures: int = 3           # consecutive failed batches that take a model out
    # CUDA graphs captured per session (bucketed shapes); 0: off. 320 holds all of a Laya model's:
    # 218 for english (512 tokens; 332 MiB and 12 s of captures on the H200, graph_cost_probe,
    # 2026-12-01), 259 for multilingual and typed-decisions (1,024 tokens; 406 MiB and 14 s for
    # typed-decisions).
    cuda_graphs: int = 320
    cuda_graph_rows: int = 64               # larger batches run uncaptured at their own shapes
    # Rows × longest row above which a batch runs uncaptured, in place of each model's own bound
    # (models.base.GraphPolicy.max_tokens: Laya 16 × 512, the Qwen families 1,024); 0: the model's.
    cuda_graph_tokens: int = 0
    # Capture, as a model loads, every shape its policy lists (models.base.GraphPolicy.precapture:
    # Laya's 218 took 12 s on the H200), so no request waits for a capture. Off: on first sight.
    cuda_graph_precapture: bool = True
    # Once every model is warm, freeze the objects alive then out of Python's garbage collection
    # (gc.freeze): a full collection then walks only what requests left behind (app/gc_pauses.py).
    gc_freeze: bool = True
    # A replay's inputs and outputs go through page-locked host buffers (app/runtime/pinned.py).
    pinned_host_buffers: bool = True
    # ONNX Runtime's CUDA attention backends (bitmask); 19 = flash | memory-efficient | unfused,
    # no cuDNN: cuDNN builds a plan per new shape (H200, Laya c=64: p99 552 -> 75 ms). 0: ORT's choice.
    cuda_sdpa_kernel: int = 19
    # ONNX Runtime's GatedDeltaNet engine (ORT_GDN_PLAN, read as each session is built; Qwen3.5
    # families): chunked_split hoists the state-free work out of the sequential scan and halves
    # the value blocks, so one row fills the GPU (H200, Cua-S1 1 x 218: 9.5 -> 8.4 ms; HTTP c=1
    # 10.9 -> 9.9 ms) but 16 x 218 is 12% slower (82 -> 92 ms). auto: ORT's heuristic (chunked).
    cuda_gdn_plan: str = "chunked_split"
    # The worker's GIL switch interval (sys.setswitchinterval): how long the executor thread,
    # back from a forward pass, may wait for the GIL while the busy event loop holds it. 0:
    # Python's own (5 ms).
    gil_switch_interval_ms: float = 0.0
    # Threads of the tokenizer's own pool (rayon's RAYON_NUM_THREADS, which an operator's value in
    # the environment overrides), at most one per core; 0: rayon's default, one per core. A turn's
    # few short texts gain nothing from 16 threads, whose wake-ups cost ~150 µs of CPU a request
    # (H200, Laya c=64: 4 threads used 16-25% less CPU a request than 16, and served as much or more).
    tokenizer_threads: int = 4
    # A bound in µs on how slowly an idle core may wake, held through /dev/cpu_dma_latency while the
    # engine runs (app/cpu_latency.py); 0: idle cores poll. -1: the kernel's own choice. At c=1 the
    # host work of every request lands on threads that slept through its forward pass.
    cpu_dma_latency_us: int = -1
    # How the executor thread waits for the GPU at the end of a run (app/runtime/cuda_sync.py):
    # auto (CUDA's heuristic), spin, yield or blocking.
    cuda_sync: str = "auto"
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.profile not in PROFILES:
            raise ValueError("profile must be one of %s, got %r" % (PROFILES, self.profile))
        if self.cuda_gdn_plan not in GDN_PLANS:
            raise ValueError("cuda_gdn_plan must be one of %s, got %r" % (GDN_PLANS, self.cuda_gdn_plan))
        if self.cuda_sync not in CUDA_SYNC_MODES:
            raise ValueError("cuda_sync must be one of %s, got %r" % (CUDA_SYNC_MODES, self.cuda_sync))
        if self.disconnect_watch_ms < 0:
            raise ValueError("disconnect_watch_ms must be 0 or positive")
        if self.gil_switch_interval_ms < 0:
            raise ValueError("gil_switch_interval_ms must be 0 (Python's default) or positive")
        if self.cpu_dma_latency_us < -1:
            raise ValueError("cpu_dma_latency_us must be -1 (the kernel's choice), 0 or positive")
        if self.tokenizer_threads < 0:
            raise ValueError("tokenizer_threads must be 0 (one per core) or positive")
        for name in ("max_body_bytes", "queue_size", "max_batch_rows", "max_batch_tokens", "warmup_requests",
                     "fatal_after_failures"):
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
