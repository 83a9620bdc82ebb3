"""Pinned host buffers for CUDA-graph replays (app/runtime/pinned.py).

CI has no CUDA runtime, so the copies here go through a host-memory double of libcudart's four
entry points (cudaHostAlloc, cudaFreeHost, cudaMemcpy, cudaGetErrorString) over a CPU GraphRunner,
whose bound blocks are host memory: the real path through `Captured` (staging in the pinned
buffer, one copy each way by pointer, results that outlive the next replay) runs against a real
ONNX Runtime session. On the GPU, benchmarks/gpu/pass_probe.py checks each replay against a
plain run."""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

from app.runtime import pinned, sessions
from tests.app.test_sessions import mixed  # noqa: F401  (the fixture: three inputs, two outputs)


class HostCudart:
    """libcudart's entry points that pinned.py calls, on plain host memory, counting the calls."""

    def __init__(self):
        self.buffers, self.copies, self.freed = {}, [], []
        self.fail_next = 0

        def host_alloc(pointer, size, flags):
            buf = ctypes.create_string_buffer(size)
            self.buffers[ctypes.addressof(buf)] = buf
            pointer._obj.value = ctypes.addressof(buf)  # byref(c_void_p): the out-parameter
            return 0

        def memcpy(dst, src, size, kind):
            if self.fail_next:
                code, self.fail_next = self.fail_next, 0
                return code
            ctypes.memmove(dst, src, size)
            self.copies.append(("to_device" if kind == 1 else "to_host", size))
            return 0

        def free_host(pointer):
            self.freed.append(pointer.value)
            return 0

        self.cudaHostAlloc, self.cudaMemcpy, self.cudaFreeHost = host_alloc, memcpy, free_host
        self.cudaGetErrorString = lambda code: b"an illegal memory access was encountered"


def _runtime() -> pinned.CudaRuntime:
    cuda = pinned.CudaRuntime.__new__(pinned.CudaRuntime)
    cuda.path, cuda.lib = "host-double", HostCudart()
    return cuda


def _feeds(rng):
    return {
        "ids": rng.integers(0, 1000, (3, 40)),
        "mask": rng.random((3, 40)) < 0.5,
        "scores": rng.standard_normal((3, 40)).astype(np.float32),
    }


def test_replays_copy_once_each_way_through_pinned_buffers(mixed):  # noqa: F811
    runner = sessions.GraphRunner(mixed, 0, max_graphs=4, device="cpu")
    runner.cuda = cuda = _runtime()
    rng = np.random.default_rng(1)
    kept = []
    runner.capture(_feeds(np.random.default_rng(0)))
    for _ in range(4):
        feeds = _feeds(rng)
        total, id_sum = runner.run(None, feeds)
        np.testing.assert_allclose(total, (feeds["scores"] * feeds["mask"]).sum(1), rtol=1e-6)
        np.testing.assert_array_equal(id_sum, feeds["ids"].sum(1))
        kept.append((total.copy(), id_sum.copy(), total, id_sum))
    for copy_total, copy_ids, total, id_sum in kept:  # not views of the pinned output
        np.testing.assert_array_equal(total, copy_total)
        np.testing.assert_array_equal(id_sum, copy_ids)
    (entry,) = runner.graphs.values()
    assert entry.cuda is cuda and entry.staging.ctypes.data == entry.pinned_in.ptr
    # The capture fed the block once; every replay fed it once and read it once, whole: 1,792
    # bytes in, 512 out.
    assert cuda.lib.copies == [("to_device", 1792)] + [("to_device", 1792), ("to_host", 512)] * 4
    assert len(cuda.lib.buffers) == 2
    held = {entry.pinned_in.ptr, entry.pinned_out.ptr}
    assert cuda.lib.freed == []
    del entry, runner
    gc.collect()
    assert set(cuda.lib.freed) == held  # freed with their graph


def test_a_failed_copy_raises_with_cudas_message(mixed):  # noqa: F811
    runner = sessions.GraphRunner(mixed, 0, max_graphs=4, device="cpu")
    runner.cuda = cuda = _runtime()
    feeds = _feeds(np.random.default_rng(2))
    runner.capture(feeds)
    cuda.lib.fail_next = 700
    with pytest.raises(RuntimeError, match=r"cudaMemcpy to the device failed: an illegal memory access .*\(700\)"):
        runner.run(None, feeds)


def test_without_a_cuda_runtime_replays_copy_as_onnx_runtime_does(mixed):  # noqa: F811
    """A CPU session (and CI) loads no libcudart: no pinned buffers, ONNX Runtime's copies."""
    assert pinned.loaded_cudart() is None and pinned.runtime() is None
    runner = sessions.GraphRunner(mixed, 0, max_graphs=4, device="cpu")
    feeds = _feeds(np.random.default_rng(3))
    runner.capture(feeds)
    (entry,) = runner.graphs.values()
    assert runner.cuda is None and entry.cuda is None and entry.pinned_in is None


def test_the_runtime_is_the_one_the_process_loaded(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f0000000000-7f0000001000 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f0000002000-7f0000003000 r--p 00000000 00:00 0 \n"
        "7f0000004000-7f0000005000 r-xp 00000000 08:01 2 /opt/venv/lib/python3.12/site-packages/"
        "nvidia/cuda_runtime/lib/libcudart.so.13\n"
    )
    assert (
        pinned.loaded_cudart(str(maps))
        == "/opt/venv/lib/python3.12/site-packages/nvidia/cuda_runtime/lib/libcudart.so.13"
    )
    maps.write_text("7f0000000000-7f0000001000 r-xp 00000000 08:01 1 /usr/lib/libc.so.6\n")
    assert pinned.loaded_cudart(str(maps)) is None
    assert pinned.loaded_cudart(str(tmp_path / "absent")) is None
