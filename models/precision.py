"""The reduced-precision parity gate: a half-precision export may serve only if, on the
same inputs as its float32 reference, every option distribution keeps its top choice where the
fp32 top-two margin is at least 0.05 and no probability moves by more than 0.02.

Every family's half-precision export runs it, on the provider it will be served on where it can
(`gate_session`), and records the result in its manifest under `check.parity_gate`. What a
family does with a failure is the operator's choice (`GATE_MODES`): refuse the export (the
default), or record the failure and export anyway (random-weight checkpoints for benchmarks,
whose deep random stacks amplify any rounding past 0.02; docs/benchmarks.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

MARGIN = 0.05
MAX_DRIFT = 0.02
GATE_MODES = ("enforce", "record")
NO_CUDA = "this onnxruntime has no CUDA provider (the `gpu` extra)"


def softmax(logits: npt.ArrayLike) -> npt.NDArray[np.float64]:
    z = np.asarray(logits, dtype=np.float64)
    z = np.exp(z - z.max(-1, keepdims=True))
    out: npt.NDArray[np.float64] = z / z.sum(-1, keepdims=True)
    return out


def gate_rows(probs: Sequence[np.ndarray], reference: Sequence[np.ndarray]) -> dict[str, Any]:
    """One distribution per row (rows may have different option counts): the gate's measures."""
    drift, same, gated = 0.0, 0, 0
    for p, r in zip(probs, reference, strict=True):
        p, r = np.asarray(p, dtype=np.float64), np.asarray(r, dtype=np.float64)
        drift = max(drift, float(np.abs(p - r).max()))
        top = np.sort(r)[::-1]
        if len(top) < 2 or top[0] - top[1] >= MARGIN:
            gated += 1
            same += int(p.argmax() == r.argmax())
    return {
        "rows": len(probs),
        "max_prob_drift": drift,
        "top_choice_identical": "%d/%d" % (same, gated),
        "passes": drift <= MAX_DRIFT and same == gated,
    }


class GateFailed(RuntimeError):
    """A half-precision graph that fails the gate, or whose gate cannot run, under `enforce`
    (`python -m models.export` exits 3: a float32 export, which needs no gate, is the remedy)."""


class GateUnavailable(GateFailed):
    """The gate a half-precision export needs cannot run on this machine: found before the export."""


def check_gate_mode(mode: str) -> None:
    """Refuse a bad gate mode before minutes of export, not after."""
    if mode not in GATE_MODES:
        raise ValueError("parity_gate must be one of %s, got %r" % (", ".join(GATE_MODES), mode))


def judge(result: dict[str, Any], mode: str, what: str = "half-precision graph") -> dict[str, Any]:
    """`result` (gate_rows' measures) with the mode recorded; raises GateFailed under enforce."""
    result = dict(result, mode=mode)
    if not result["passes"] and mode == "enforce" and "not_run" in result:
        raise GateFailed("%s: the parity gate could not run: %s" % (what, result["not_run"]))
    if not result["passes"] and mode == "enforce":
        raise GateFailed(
            "%s fails the parity gate (max probability drift %.3g, limit %g; top choice %s): %s. "
            "Export in float32, or pass --parity-gate record to export anyway and record the "
            "failure in the manifest"
            % (what, result["max_prob_drift"], MAX_DRIFT, result["top_choice_identical"], result)
        )
    return result


def cuda_listed() -> bool:
    import onnxruntime as ort

    return "CUDAExecutionProvider" in ort.get_available_providers()


def gate_session(onnx_path: str, device: str = "auto") -> tuple[Any, str, str | None]:
    """(session, "cuda" | "cpu", why): an ONNX Runtime session on the CUDA provider where one
    initialises (`device` "auto"), else on the CPU provider. The gate runs where the graph will
    be served: the CPU provider lacks fp16 kernels for most ops and computes them in float32, so
    a CPU gate understates the drift CUDA serves. `why` is None, or why a CUDA provider that this
    onnxruntime lists did not take the graph (a missing driver or device, a broken CUDA library),
    which the gate's record and its log line carry. `device="cpu"`: a float32 graph's check."""
    import onnxruntime as ort

    why = None
    if device == "auto" and cuda_listed():
        try:
            if hasattr(ort, "preload_dlls"):
                ort.preload_dlls()
            cuda = ort.InferenceSession(onnx_path, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
            if cuda.get_providers()[0] == "CUDAExecutionProvider":
                return cuda, "cuda", None
            why = "the CUDA provider did not initialise (ONNX Runtime fell back to its CPU provider)"
        except Exception as exc:  # gated on the CPU instead, and the record says why
            why = "the CUDA provider failed: %s" % (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    return ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"]), "cpu", why


def with_cuda_failure(result: dict[str, Any], why: str | None) -> dict[str, Any]:
    """A gate's measures with `cuda_failed` recorded, where CUDA was meant to run it and did not."""
    return dict(result, cuda_failed=why) if why else result


def summary(result: dict[str, Any]) -> str:
    """One line for an export's log: what the gate found, or why it did not run."""
    if "not_run" in result:
        return "parity gate NOT RUN (recorded): %s" % result["not_run"]
    line = "parity gate vs float32 on %s: max probability drift %.1e, top choice %s, %s" % (
        result["device"],
        result["max_prob_drift"],
        result["top_choice_identical"],
        "passes" if result["passes"] else "FAILS (recorded: --parity-gate record)",
    )
    if result.get("cuda_failed"):
        line += "; WARNING: gated on the CPU, which understates CUDA's drift, because %s" % result["cuda_failed"]
    return line
