"""Loaded models by name and alias, with their lifecycle state."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any

from app.config import ConfigError
from app.runtime.recovery import Recovery
from models.base import ServedModel
from models.errors import UnknownModel


class SlotState(enum.StrEnum):
    LOADING = "loading"  # sessions being created
    WARMING = "warming"  # sessions ready, warm-up request in flight
    READY = "ready"
    FAILED = "failed"  # out of service: rebuilt after a delay (app/runtime/recovery.py)


@dataclass(eq=False)
class ModelSlot:
    model: ServedModel
    state: SlotState = SlotState.LOADING
    error: str | None = None
    session: Any = None  # owned by the executor thread
    device: str | None = None
    provider: str | None = None
    static_shapes: bool = False  # its ORT session replays CUDA graphs per bucketed shape
    # Small passes are padded to the adapter's bucketed shapes (app/runtime/batching.py) on every
    # device, so the CPU runs, and its tests check, the shapes a GPU replays.
    bucketed: bool = False
    runtime: str | None = None
    load_ms: float | None = None  # session creation and, where the policy asks, graph captures
    graphs_captured: int = 0  # CUDA graphs captured as the model loaded
    graphs_refused: str | None = None  # ONNX Runtime's reason for serving without CUDA graphs
    capture_s: float = 0.0  # ... and the time they took
    warmup_ms: float | None = None
    # The model's own warm-up request, prepared, once it has passed: run alone after a failed
    # pass, it tells a request at fault from a model at fault.
    probe: Any = None
    recovery: Recovery = field(default_factory=Recovery)
    created: float = field(default_factory=time.monotonic)

    @property
    def name(self) -> str:
        return self.model.name

    def cuda_graphs(self) -> str:
        """ "on" (replayed per bucketed shape), "refused" (asked for; ONNX Runtime would not capture
        this graph: `graphs_refused` says why) or "off" (on the CPU, turned off, or a model whose
        shapes never recur)."""
        return "on" if self.static_shapes else "refused" if self.graphs_refused else "off"

    def served_by(self) -> dict[str, Any]:
        src = self.model.manifest.get("source", {})
        out = {
            "checkpoint": src.get("checkpoint"),
            "revision": src.get("revision"),
            "device": self.device,
            "weights_dtype": self.model.manifest.get("weights_dtype", "float32"),
            "runtime": self.runtime,
            "compiled": self.static_shapes,
        }
        if self.model.manifest.get("random_weights"):
            out["random_weights"] = True
        return out


class Registry:
    def __init__(self, models: list[ServedModel], default: str | None = None):
        self.slots = [ModelSlot(m) for m in models]
        self.by_name: dict[str, ModelSlot] = {}
        for slot in self.slots:
            for key in (slot.name, *slot.model.aliases):
                self.by_name.setdefault(key.lower(), slot)
        if default is not None and default.strip().lower() not in self.by_name:
            raise ConfigError(
                "OMNI_DEFAULT_MODEL=%s names no loaded model (loaded: %s)"
                % (default, ", ".join(s.name for s in self.slots) or "none")
            )
        self.default = self.by_name[default.strip().lower()] if default else (self.slots[0] if self.slots else None)

    def resolve(self, name: Any) -> ModelSlot:
        """The slot a request's `model` names; none (absent or null) is the default model."""
        if name is None:
            if self.default is None:
                raise UnknownModel("no model is loaded")
            return self.default
        if not isinstance(name, str):
            raise UnknownModel("'model' must be a string naming a loaded model")
        key = name.strip().lower()
        if key == "jev-latest" and self.default is not None:
            return self.default
        slot = self.by_name.get(key)
        if slot is None:
            raise UnknownModel(
                "unknown model %r; loaded: %s"
                % (
                    name,
                    ", ".join("%s (aliases: %s)" % (s.name, ", ".join(s.model.aliases) or "none") for s in self.slots),
                )
            )
        return slot
