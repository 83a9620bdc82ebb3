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
from dataclasses import MISSING, dataclass, field, fields
from typing import Any
from collections.abc import Callable, Collection, Mapping

from models import gdn_plan

PROFILES = ("reference", "jev")
LOG_FORMATS = ("text", "json")
GDN_PLANS = gdn_plan.PLANS
# `OMNI_*` variables that other parts of the project read (the export image, `make serve`, compose,
# the image test): the server accepts them in its environment and ignores them.
OTHER_VARIABLES = frozenset(
    {
        "OMNI_CONFIG",
        "OMNI_DEMO_DIR",
        "OMNI_EXPORT_DTYPE",
        "OMNI_EXPORT_MEMORY_LIMIT",
        "OMNI_LAYA_EXPORT_DTYPE",
        "OMNI_GDN_KERNEL",
        "OMNI_REVISION",
        "OMNI_VERSION",
        "OMNI_BASE_IMAGE",
        "OMNI_TEST_DEMO",
        "OMNI_CI_CACHE",
    }
)
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")


def setting(default: Any, doc: str) -> Any:
    """A `Settings` field with its one-sentence trade-off, from which docs/configuration.md's
    reference table is made (`python -m app.config`; tests/app/test_config.py compares)."""
    if isinstance(default, (list, dict)):
        raise TypeError("a setting's default is immutable")
    return field(default=default, metadata={"doc": doc})


class ConfigError(ValueError):
    """A setting the server cannot start with; the message names it and says what it takes."""


@dataclass(frozen=True)
class Settings:
    models: tuple[str, ...] = setting(
        (),
        "the export directories to serve (or names under `OMNI_MODEL_ROOT`); each costs its memory and start-up time",
    )
    model_root: str | None = setting(None, "where bare model names are looked up")
    default_model: str | None = setting(
        None, "what `jev-latest` and a request without `model` get (default: the first model)"
    )
    device: str = setting(
        "auto",
        "auto, cpu, cuda or cuda:N: auto takes a GPU where onnxruntime-gpu sees one, cuda refuses to start without one",
    )
    profile: str = setting("reference", "the default response profile, reference or jev (a header picks per request)")
    api_key: str | None = setting(
        None, "a bearer token /v1/* requires when set; none leaves them open to whoever reaches the port"
    )
    max_body_bytes: int = setting(
        8 * 1024 * 1024,
        "the largest body as sent (413 past it): larger lets bigger states in, and bigger bodies held in memory",
    )
    max_decompressed_bytes: int = setting(
        32 * 1024 * 1024, "the largest gzip or zstd body once decompressed (413 past it)"
    )
    max_body_values: int = setting(
        1 << 18, "JSON values one body may hold (413 past it): bounds the memory and time decoding takes"
    )
    body_timeout_s: float = setting(
        10.0, "a body slower than this is 408: lower frees connections from slow clients sooner"
    )
    request_timeout_s: float = setting(
        30.0,
        "a request's whole budget, queue and inference, else 504: "
        "longer waits out bursts, shorter frees clients to retry",
    )
    queue_size: int = setting(
        1024, "requests waiting for the executor, else 503 overloaded: more absorbs bursts at the cost of latency"
    )
    max_batch_rows: int = setting(
        256, "rows of one forward pass: more raises throughput under load and each pass's latency"
    )
    max_batch_tokens: int = setting(
        131072, "rows x padded length of one pass: bounds a pass's memory (the queue holds 8 passes' worth)"
    )
    intra_op_threads: int = setting(
        0, "ONNX Runtime's CPU threads per session (0: its default): fewer leaves cores to the event loop and tokenizer"
    )
    retry_after_s: int = setting(1, "the Retry-After seconds on a 503")
    warmup_requests: int = setting(
        1, "full-path warm-up requests per model before it is ready: more waits out slow first passes before traffic"
    )
    pass_timeout_s: float = setting(
        120.0,
        "the longest a pass or capture runs before the executor is "
        "taken as hung and /livez fails: raise it for large models on CPUs",
    )
    cuda_graphs: int = setting(
        320,
        "CUDA graphs per session at most (0: off, and no bucketed shapes): "
        "each holds device memory, each replay saves launches",
    )
    cuda_graph_rows: int = setting(
        64, "passes of more rows run uncaptured at their own shapes: replay pays while a pass is launch-bound"
    )
    cuda_graph_precapture: bool = setting(
        True,
        "capture a model's listed shapes for up to 2.5 s of its load: a slower start, first requests at full speed",
    )
    cuda_gdn_plan: str = setting(
        gdn_plan.DEFAULT,
        "ONNX Runtime's GatedDeltaNet engine for the Qwen3.5 "
        "families: chunked_split is fastest for a few rows a pass, auto for many",
    )
    log_format: str = setting(
        "text", "text (a line a record, for people) or json (an object a line, for log pipelines)"
    )

    def __post_init__(self) -> None:
        for name, check in _CHECKS.items():
            check(getattr(self, name), _env_name(name))

    def model_dirs(self) -> list[str]:
        """`models` with bare names (no path separator) resolved under `model_root`. An entry
        `name=source` (the export service's syntax) is the export it wrote: `name`."""
        names = [m.split("=", 1)[0].strip() if "=" in m else m for m in self.models]
        return [os.path.join(self.model_root, m) if self.model_root and os.sep not in m else m for m in names]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        path = env.get("OMNI_CONFIG")
        if path:
            data = _read_file(path)
            unknown = sorted(set(data) - set(_FIELD_TYPES))
            if unknown:
                raise ConfigError(
                    "unknown key%s in OMNI_CONFIG=%s: %s"
                    % ("s" if len(unknown) > 1 else "", path, _suggest(unknown, sorted(_FIELD_TYPES)))
                )
            for key, value in data.items():
                values[key] = _coerce(key, value, "key %r in %s" % (key, path))
        unknown = sorted(k for k in env if k.startswith("OMNI_") and k not in _ENV_NAMES and k not in OTHER_VARIABLES)
        if unknown:
            raise ConfigError(
                "unknown variable%s %s; the settings are in docs/configuration.md"
                % ("s" if len(unknown) > 1 else "", _suggest(unknown, sorted(_ENV_NAMES)))
            )
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
        raise ConfigError(
            "OMNI_CONFIG=%s is not valid %s: %s" % (path, "TOML" if path.endswith(".toml") else "JSON", exc)
        ) from None
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
        return _to_models(value, label)
    if kind in _SCALARS:
        return _SCALARS[kind](value, label)
    if (value is None or value == "") and "None" in kind:
        return None
    if not isinstance(value, str):
        raise ConfigError("%s must be a string, got %r" % (label, value))
    return value


def _to_models(value: Any, label: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return _split_models(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    raise ConfigError("%s must be a list of export directories, got %r" % (label, value))


def _to_bool(value: Any, label: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _BOOLS:
        return _BOOLS[value.strip().lower()]
    raise ConfigError("%s must be one of %s, got %r" % (label, "/".join(_BOOLS), value))


def _to_int(value: Any, label: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ConfigError("%s must be a whole number, got %r" % (label, value))


def _to_float(value: Any, label: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise ConfigError("%s must be a number, got %r" % (label, value))


_SCALARS = {"bool": _to_bool, "int": _to_int, "float": _to_float}


# A setting's check: (its value, the variable that set it) -> None, or ConfigError.
Check = Callable[[Any, str], None]


def _at_least(low: float) -> Check:
    def check(value: Any, label: str) -> None:
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < low:
            raise ConfigError("%s must be %s, got %r" % (label, "a positive number" if low > 0 else "0 or more", value))

    return check


def _above_zero(value: Any, label: str) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise ConfigError("%s must be a number above 0, got %r" % (label, value))


def _one_of(choices: Collection[str]) -> Check:
    def check(value: Any, label: str) -> None:
        if value not in choices:
            raise ConfigError("%s must be one of %s, got %r" % (label, ", ".join(choices), value))

    return check


def _device(value: Any, label: str) -> None:
    if not isinstance(value, str) or not _DEVICE.fullmatch(value):
        raise ConfigError("%s must be auto, cpu, cuda or cuda:N, got %r" % (label, value))


_CHECKS = {
    "device": _device,
    "profile": _one_of(PROFILES),
    "cuda_gdn_plan": _one_of(GDN_PLANS),
    "log_format": _one_of(LOG_FORMATS),
    **{
        name: _at_least(1)
        for name in (
            "max_body_bytes",
            "max_decompressed_bytes",
            "max_body_values",
            "queue_size",
            "max_batch_rows",
            "max_batch_tokens",
            "warmup_requests",
            "retry_after_s",
            "cuda_graph_rows",
        )
    },
    **{name: _at_least(0) for name in ("intra_op_threads", "cuda_graphs")},
    **{name: _above_zero for name in ("body_timeout_s", "request_timeout_s", "pass_timeout_s")},
}


def reference_table() -> str:
    """docs/configuration.md's reference table: every setting's variable, default and trade-off."""
    rows = ["| variable | default | what it trades |", "|---|---|---|"]
    for f in fields(Settings):
        default = f.default if f.default is not MISSING else None
        shown = (
            "none" if default in (None, ()) else ("`%s`" % str(int(default) if isinstance(default, bool) else default))
        )
        rows.append("| `%s` | %s | %s |" % (_env_name(f.name), shown, f.metadata["doc"]))
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(reference_table(), end="")
