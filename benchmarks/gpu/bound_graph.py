"""A small ONNX graph in an ONNX Runtime session with its inputs and outputs bound where it runs
(IO binding): what the single-op probes (attention_probe, layer_ops_probe) time, so a call
moves no data between host and device."""

from __future__ import annotations

from collections.abc import Callable


def bound(
    graph: bytes, feeds: dict, outputs: list[str], cuda: bool, warmup: int = 3
) -> tuple[Callable[[], None], object]:
    """(run, binding): `run()` runs the graph once on CUDA (or the CPU), `binding.copy_outputs_to_cpu()`
    reads what the last run wrote; the graph has already run `warmup` times."""
    import onnxruntime as ort

    where = "cuda" if cuda else "cpu"
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        graph, options, providers=["CUDAExecutionProvider" if cuda else "CPUExecutionProvider"]
    )
    binding = session.io_binding()
    for name, value in feeds.items():
        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(value, where, 0))
    for name in outputs:
        binding.bind_output(name, where)

    def run() -> None:
        session.run_with_iobinding(binding)

    for _ in range(warmup):
        run()
    return run, binding


def runtime(device: str) -> tuple[bool, type]:
    """(whether the probe runs on CUDA, its dtype: float16 there, float32 on the CPU kernels),
    with onnxruntime's CUDA libraries loaded where it does; warnings off."""
    import warnings

    import numpy as np
    import onnxruntime as ort

    warnings.simplefilter("ignore")
    cuda = device != "cpu"
    if cuda:
        ort.preload_dlls()
    return cuda, np.float16 if cuda else np.float32
