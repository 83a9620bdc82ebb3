"""ONNX Runtime sessions, created only on the executor thread.

`device=auto` takes the CUDA execution provider when onnxruntime-gpu can use a GPU (after
`preload_dlls`, which finds the CUDA/cuDNN pip packages) and the CPU provider otherwise.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger("omni.sessions")
_preloaded = False


@dataclass
class SessionInfo:
    session: object
    device: str             # "cuda:0" or "cpu"
    provider: str
    runtime: str            # "onnxruntime 1.31.1"


def _cuda_available(ort) -> bool:
    global _preloaded
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return False
    if not _preloaded and hasattr(ort, "preload_dlls"):
        try:
            ort.preload_dlls()
        except Exception as exc:  # a missing CUDA library: fall back to CPU, say why
            log.warning("onnxruntime-gpu could not preload CUDA libraries: %s", exc)
            return False
        _preloaded = True
    return True


def create(onnx_path: str, device: str = "auto", intra_op_threads: int = 0) -> SessionInfo:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if intra_op_threads:
        options.intra_op_num_threads = intra_op_threads
    want_cuda = device.startswith("cuda") or (device == "auto" and _cuda_available(ort))
    if want_cuda and device.startswith("cuda") and not _cuda_available(ort):
        raise RuntimeError("device %r asked for, but onnxruntime has no usable CUDA provider "
                           "(install the `gpu` extra on a machine with an NVIDIA driver)" % device)
    runtime = "onnxruntime %s" % ort.__version__
    if want_cuda:
        index = int(device.split(":", 1)[1]) if ":" in device else 0
        session = ort.InferenceSession(
            onnx_path, sess_options=options,
            providers=[("CUDAExecutionProvider", {"device_id": index}), "CPUExecutionProvider"])
        if session.get_providers()[0] != "CUDAExecutionProvider":
            raise RuntimeError("CUDA provider did not initialise for %s" % onnx_path)
        return SessionInfo(session, "cuda:%d" % index, "CUDAExecutionProvider", runtime)
    session = ort.InferenceSession(onnx_path, sess_options=options, providers=["CPUExecutionProvider"])
    return SessionInfo(session, "cpu", "CPUExecutionProvider", runtime)
