"""ONNX Runtime sessions, created only on the executor thread.

`device=auto` takes the CUDA execution provider when onnxruntime-gpu can use a GPU (after
`preload_dlls`, which finds the CUDA/cuDNN pip packages) and the CPU provider otherwise.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from app.runtime import pinned
from models import gdn_plan

log = logging.getLogger("omni.sessions")
_preloaded = False

Feeds = dict[str, np.ndarray]  # an ORT session's inputs by name
Run = Callable[[Sequence[str] | None, Feeds], list[np.ndarray]]  # an ORT session's `run(output_names, feeds)`
ShapeKey = tuple[tuple[str, tuple[int, ...], str], ...]  # each feed's (name, shape, dtype string)
Slot = tuple[np.dtype[Any], tuple[int, ...], int, int]  # a tensor's (dtype, shape, offset, bytes) in a block


@dataclass
class SessionInfo:
    session: object  # what the executor calls: `.run(None, feeds)`, like an InferenceSession
    device: str  # "cuda:0" or "cpu"
    provider: str
    runtime: str  # "onnxruntime 1.31.1"
    static_shapes: bool = False  # ask adapters for bucketed shapes (CUDA graphs replay per shape)
    graphs_refused: str | None = None  # why ONNX Runtime would not capture this graph (served without)


class GraphRunner:
    """IO binding with one captured CUDA graph per input-shape bucket, replayed on later runs.

    A plain export launches on the order of a thousand kernels per forward; replaying a captured
    graph launches them at once. Each captured shape gets its own graph id, device buffers the
    new request's data is copied into, and a graph-owned memory pool. `run` never captures: a
    shape without a graph runs bound but uncaptured (graph id -1), and on its `capture_after`-th
    sighting becomes a candidate (`pending`, with a copy of its feeds). `capture` takes one shape's
    graph; the executor thread calls it between passes, for the candidate the batching policy picks
    (app/runtime/batching.py). Past `max_graphs` shapes nothing more is counted or captured. A
    shape whose capture fails is logged and runs uncaptured from then on: its requests are
    answered, not failed.
    """

    def __init__(self, session: Any, device_id: int, max_graphs: int, capture_after: int = 1, device: str = "cuda"):
        import onnxruntime as ort

        self.ort, self.session, self.device_id, self.max_graphs = ort, session, device_id, max_graphs
        self.device = device  # where inputs and outputs are bound ("cpu" only in tests: no capture)
        # Replays copy through page-locked host buffers where the CUDA runtime is at hand (pinned.py).
        self.cuda = pinned.runtime() if device == "cuda" else None
        self.capture_after = max(1, capture_after)
        self.outputs = [o.name for o in session.get_outputs()]
        self.graphs: dict[ShapeKey, Captured] = {}
        self.sightings: dict[ShapeKey, int] = {}  # shapes seen but not captured (bucketed: few)
        self.pending: dict[ShapeKey, Feeds] = {}  # shapes to capture, in the order they became due
        self.refused: set[ShapeKey] = set()  # shapes whose capture failed: never tried again
        self.capture_s = 0.0  # time the capturing runs took, in all
        self._ids = 0  # graph ids handed out (a failed one is not reused)

    def _binding(self, feeds: Feeds, graph_id: int) -> tuple[Any, dict[str, Any], Any]:
        io = self.session.io_binding()
        values = {}
        for name, array in feeds.items():
            values[name] = self.ort.OrtValue.ortvalue_from_numpy(array, self.device, self.device_id)
            io.bind_ortvalue_input(name, values[name])
        for name in self.outputs:
            io.bind_output(name, self.device, self.device_id)
        return io, values, self.options(graph_id)

    def options(self, graph_id: int) -> Any:
        """RunOptions naming the CUDA graph a run captures or replays (-1: neither)."""
        options = self.ort.RunOptions()
        options.add_run_config_entry("gpu_graph_id", str(graph_id))
        return options

    @staticmethod
    def shape_key(feeds: Feeds) -> ShapeKey:
        """What a captured graph is keyed on: each feed's name, shape and dtype."""
        return tuple((name, array.shape, array.dtype.str) for name, array in sorted(feeds.items()))

    def takes(self, feeds: Feeds) -> bool:
        """Whether `run` would replay or count these feeds' shape: False once the budget is full
        and the shape is not among the captured ones, or where its capture failed, when padding
        it buys nothing."""
        if len(self.graphs) < self.max_graphs and not self.refused:
            return True  # the common case, every pass: no shape key to build
        key = self.shape_key(feeds)
        return key in self.graphs or (len(self.graphs) < self.max_graphs and key not in self.refused)

    def run(self, output_names: Sequence[str] | None, feeds: Feeds) -> list[np.ndarray]:
        """Replay the feeds' shape's graph, or run them uncaptured (counting the sighting)."""
        key = self.shape_key(feeds)
        entry = self.graphs.get(key)
        if entry is None:
            if len(self.graphs) < self.max_graphs and key not in self.refused:
                seen = self.sightings[key] = self.sightings.get(key, 0) + 1
                if seen >= self.capture_after and key not in self.pending:
                    self.pending[key] = {name: array.copy() for name, array in feeds.items()}
            return self.run_uncaptured(output_names, feeds)
        entry.feed(feeds)
        entry.run()
        return entry.results()

    def want(self, feeds: Feeds) -> None:
        """Make the feeds' shape a candidate without a sighting (a shape the model lists)."""
        key = self.shape_key(feeds)
        if key not in self.graphs and key not in self.refused:
            self.pending.setdefault(key, feeds)

    def capture(self, feeds: Feeds) -> float | None:
        """Capture the feeds' shape now: the seconds it took, or None where it is captured already,
        the budget is full or the capture failed (that shape then runs uncaptured for good)."""
        key = self.shape_key(feeds)
        self.pending.pop(key, None)
        if key in self.graphs or key in self.refused or len(self.graphs) >= self.max_graphs:
            return None
        self.sightings.pop(key, None)
        t0 = time.perf_counter()
        self._ids += 1
        try:
            # An uncaptured run first: its outputs' shapes size the block the graph writes to.
            shapes = [(a.dtype, a.shape) for a in self.run_uncaptured(None, feeds)]
            entry = Captured(self, feeds, shapes, self._ids)
            entry.feed(feeds)
            entry.run()  # ONNX Runtime runs, captures, replays
        except Exception as exc:
            # A graph ONNX Runtime cannot capture (an op that synchronises, say) must not fail
            # every request of its shape, nor take the model out of service with them.
            self.refused.add(key)
            log.warning(
                "capturing CUDA graph %d failed; that shape runs uncaptured from now on (%s): %s",
                self._ids,
                _shapes(key),
                str(exc)[:300],
            )
            return None
        self.graphs[key] = entry
        took = time.perf_counter() - t0
        self.capture_s += took
        if len(self.graphs) >= self.max_graphs:
            self.pending.clear()
            self.sightings.clear()
        log.info(
            "captured CUDA graph %d/%d in %.0f ms: %s", len(self.graphs), self.max_graphs, took * 1000.0, _shapes(key)
        )
        return took

    def run_uncaptured(self, output_names: Sequence[str] | None, feeds: Feeds) -> list[np.ndarray]:
        """One run at the feeds' own shapes, neither captured nor replayed (graph id -1)."""
        io, _, options = self._binding(feeds, -1)
        self.session.run_with_iobinding(io, options)
        return [value.numpy() for value in io.get_outputs()]


class Captured:
    """One captured shape's binding. All its inputs live in one device block and all its outputs
    in another, so a replay costs one host-to-device and one device-to-host copy, not one per
    tensor (each synchronous copy has a fixed cost). Offsets are aligned to 256 bytes, as CUDA's
    allocations are."""

    def __init__(
        self, runner: GraphRunner, feeds: Feeds, outputs: list[tuple[np.dtype[Any], tuple[int, ...]]], graph_id: int
    ):
        ort, device, index = runner.ort, runner.device, runner.device_id
        self.session, self.copy_out = runner.session, device == "cpu"  # a CPU block's numpy() is a view
        self.io = io = runner.session.io_binding()
        in_slots, in_size = _layout([(a.dtype, a.shape) for a in feeds.values()])
        out_slots, out_size = _layout(outputs)
        self.inputs = ort.OrtValue.ortvalue_from_shape_and_type([max(1, in_size)], np.uint8, device, index)
        self.outputs = ort.OrtValue.ortvalue_from_shape_and_type([max(1, out_size)], np.uint8, device, index)
        # Copies go through page-locked buffers where the CUDA runtime gives them (both, or neither).
        self.cuda: pinned.CudaRuntime | None = None
        self.pinned_in: pinned.PinnedArray | None = None
        self.pinned_out: pinned.PinnedArray | None = None
        if runner.cuda is not None:
            try:
                self.pinned_in, self.pinned_out = runner.cuda.pinned(in_size), runner.cuda.pinned(out_size)
                self.cuda = runner.cuda
            except RuntimeError as exc:
                log.warning("graph %d copies through pageable memory: %s", graph_id, exc)
        self.staging = self.pinned_in.array if self.pinned_in is not None else np.zeros(max(1, in_size), np.uint8)
        self.views: dict[str, np.ndarray] = {}  # each feed's place in the host staging buffer
        self.in_ptr, self.out_ptr = self.inputs.data_ptr(), self.outputs.data_ptr()
        for name, (dtype, shape, offset, size) in zip(feeds, in_slots, strict=True):
            io.bind_input(name, device, index, dtype, list(shape), self.in_ptr + offset)
            self.views[name] = self.staging[offset : offset + size].view(dtype).reshape(shape)
        for name, (dtype, shape, offset, _) in zip(runner.outputs, out_slots, strict=True):
            io.bind_output(name, device, index, dtype, list(shape), self.out_ptr + offset)
        self.out_slots = out_slots
        self.options = runner.options(graph_id)

    def feed(self, feeds: Feeds) -> None:
        for name, array in feeds.items():
            np.copyto(self.views[name], array)
        cuda, buffer = self.cuda, self.pinned_in
        if cuda is not None and buffer is not None:
            cuda.to_device(self.in_ptr, buffer, buffer.size)
        else:
            self.inputs.update_inplace(self.staging)

    def run(self) -> None:
        self.session.run_with_iobinding(self.io, self.options)

    def results(self) -> list[np.ndarray]:
        cuda, buffer = self.cuda, self.pinned_out
        if cuda is not None and buffer is not None:
            cuda.to_host(buffer, self.out_ptr, buffer.size)
            host = buffer.array.copy()  # the next replay writes the same buffer
        else:
            host = self.outputs.numpy()
            if self.copy_out:
                host = host.copy()
        return [
            host[offset : offset + size].view(dtype).reshape(shape) for dtype, shape, offset, size in self.out_slots
        ]


def _layout(tensors: Iterable[tuple[npt.DTypeLike, Sequence[int]]]) -> tuple[list[Slot], int]:
    """[(dtype, shape, offset, bytes)] for tensors packed one after another at 256-byte
    boundaries, and the bytes in all."""
    slots: list[Slot] = []
    offset = 0
    for like, shape in tensors:
        dtype = np.dtype(like)
        size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        slots.append((dtype, tuple(shape), offset, size))
        offset += -(-size // 256) * 256
    return slots, offset


def _shapes(key: ShapeKey) -> str:
    return " ".join("%s%s" % (name, list(shape)) for name, shape, _ in key)


# The GatedDeltaNet engine (ORT_GDN_PLAN) while a session is built; sessions are built one at a
# time, on the executor thread, so setting the process's variable is safe.
gdn_engine = gdn_plan.engine


def _cuda_available(ort: Any) -> bool:
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


# ONNX Runtime's refusals: "... cannot use the CUDA Graph feature ..." (control flow) and, for a
# graph with compute placed on the CPU, "... cannot use the graph capture feature ...".
_GRAPH_REFUSAL = re.compile(r"cannot use the (CUDA Graph|graph capture) feature")


def without_graphs_if_refused(
    build: Callable[[dict[str, Any]], Any], cuda: dict[str, Any], onnx_path: str
) -> tuple[Any, str | None]:
    """`build(cuda)`: an InferenceSession with these CUDA provider options. ONNX Runtime refuses
    to create a session with CUDA graphs enabled for a graph it cannot capture (control-flow
    nodes, or compute it placed on the CPU): then the session without them, said in the log,
    and `enable_cuda_graph` dropped from `cuda`, so the model is served uncaptured, not failed.
    Returns (session, ONNX Runtime's refusal or None), so /readyz can say why."""
    try:
        return build(cuda), None
    except Exception as exc:
        if not cuda.get("enable_cuda_graph") or not _GRAPH_REFUSAL.search(str(exc)):
            raise
        reason = str(exc)[:300]
        log.warning("%s cannot be captured as CUDA graphs, so it runs without them: %s", onnx_path, reason)
        del cuda["enable_cuda_graph"]
        return build(cuda), reason


# The CUDA provider's attention backends (bitmask: 1 flash, 2 memory-efficient, 4 TensorRT fused,
# 8 cuDNN flash, 16 unfused): all but cuDNN's, which builds an execution plan for every new input
# shape and so stalls a server whose traffic brings many lengths.
SDPA_KERNELS = 1 | 2 | 16


def cuda_options(index: int, cuda_graphs: int, float32: bool) -> dict[str, Any]:
    """The CUDA provider's options. A float32 graph's products run in full float32, not TF32
    (ONNX Runtime's default on GPUs that have it): TF32 keeps float16's 10-bit mantissa, and a
    float32 export is what serves where half precision failed its parity gate."""
    cuda: dict[str, Any] = {"device_id": index, "sdpa_kernel": str(SDPA_KERNELS)}
    if cuda_graphs:
        cuda["enable_cuda_graph"] = "1"
    if float32:
        cuda["use_tf32"] = "0"
    return cuda


def create(
    onnx_path: str,
    device: str = "auto",
    intra_op_threads: int = 0,
    cuda_graphs: int = 0,
    capture_after: int = 1,
    gdn_plan: str = "auto",
    float32: bool = False,
) -> SessionInfo:
    """`cuda_graphs`: how many shapes may be captured (0: CUDA graphs off); `capture_after`: on
    which sighting a shape becomes due for capture (GraphRunner); `gdn_plan`: the GatedDeltaNet
    engine; `float32`: the graph's weights are float32 (see `cuda_options`)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if intra_op_threads:
        options.intra_op_num_threads = intra_op_threads
    want_cuda = device.startswith("cuda") or (device == "auto" and _cuda_available(ort))
    if want_cuda and device.startswith("cuda") and not _cuda_available(ort):
        raise RuntimeError(
            "device %r asked for, but onnxruntime has no usable CUDA provider "
            "(install the `gpu` extra on a machine with an NVIDIA driver)" % device
        )
    runtime = "onnxruntime %s" % ort.__version__
    if want_cuda:
        index = int(device.split(":", 1)[1]) if ":" in device else 0
        cuda = cuda_options(index, cuda_graphs, float32)
        with gdn_engine(gdn_plan):
            session, refused = without_graphs_if_refused(
                lambda cuda: ort.InferenceSession(
                    onnx_path, sess_options=options, providers=[("CUDAExecutionProvider", cuda), "CPUExecutionProvider"]
                ),
                cuda,
                onnx_path,
            )
        if session.get_providers()[0] != "CUDAExecutionProvider":
            raise RuntimeError("CUDA provider did not initialise for %s" % onnx_path)
        if cuda.get("enable_cuda_graph"):
            runner = GraphRunner(session, index, cuda_graphs, capture_after)
            log.info(
                "CUDA graph replays copy through %s",
                "pinned host buffers (%s)" % runner.cuda.path if runner.cuda is not None else "pageable host memory",
            )
            return SessionInfo(runner, "cuda:%d" % index, "CUDAExecutionProvider", runtime, static_shapes=True)
        return SessionInfo(session, "cuda:%d" % index, "CUDAExecutionProvider", runtime, graphs_refused=refused)
    # Spinning intra-op threads burn the cores the event loop and tokenizer need.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(onnx_path, sess_options=options, providers=["CPUExecutionProvider"])
    return SessionInfo(CpuSession(session, ort), "cpu", "CPUExecutionProvider", runtime)


class CpuSession:
    """A CPU InferenceSession whose large passes give their memory back. ONNX Runtime's CPU arena
    keeps the largest pass's activations for good (a pass of 64 long rows holds hundreds of MB);
    a pass whose largest input holds over `shrink_after` elements asks it to release what the run
    no longer uses, at the end of that run. Small passes keep the arena, and its speed."""

    def __init__(self, session: Any, ort: Any, shrink_after: int = 8192):
        self.session, self.shrink_after = session, shrink_after
        self.shrink = ort.RunOptions()
        self.shrink.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")

    def run(self, output_names: Sequence[str] | None, feeds: Feeds) -> list[np.ndarray]:
        large = max((a.size for a in feeds.values()), default=0) > self.shrink_after
        outputs: list[np.ndarray] = self.session.run(output_names, feeds, self.shrink if large else None)
        return outputs

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)
