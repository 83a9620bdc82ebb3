"""Page-locked (pinned) host buffers and plain copies through the CUDA runtime that ONNX Runtime
loaded, for the blocks a captured CUDA graph reads and writes (sessions.Captured).

ONNX Runtime's Python API allocates no pinned host memory: `OrtValue.update_inplace` copies from a
numpy array and `OrtValue.numpy()` into a new one, both pageable, so the driver stages each copy
through a pinned buffer of its own. A replay's inputs and outputs are one block each, so one
pinned buffer per block and one `cudaMemcpy` each way replace that staging and ONNX Runtime's
per-call wrapping. Where no CUDA runtime is loaded (the CPU provider, tests) there is none, and
the copies stay ONNX Runtime's.
"""

from __future__ import annotations

import ctypes
import logging
import weakref

import numpy as np

log = logging.getLogger("omni.pinned")

_HOST_TO_DEVICE, _DEVICE_TO_HOST = 1, 2
_runtime: CudaRuntime | None | bool = False  # False: not found yet; None: unusable


def loaded_cudart(maps: str = "/proc/self/maps") -> str | None:
    """The path of the libcudart this process has loaded (ONNX Runtime's CUDA provider's), if any.
    Loading another copy could pick a different CUDA version than the provider's."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as f:
            for line in f:
                path = line.rstrip("\n").split(None, 5)[-1]
                if "/libcudart.so" in path:
                    return path
    except OSError:
        return None
    return None


class PinnedArray:
    """`size` bytes of page-locked host memory as a uint8 numpy array; freed with its owner."""

    def __init__(self, cuda: CudaRuntime, size: int):
        ptr = ctypes.c_void_p()
        cuda.check(cuda.lib.cudaHostAlloc(ctypes.byref(ptr), size, 0), "cudaHostAlloc")
        if not ptr.value:
            raise RuntimeError("cudaHostAlloc gave no memory for %d bytes" % size)
        self.ptr: int = ptr.value
        self.size = size
        self.array = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(self.ptr))
        weakref.finalize(self, cuda.lib.cudaFreeHost, ctypes.c_void_p(self.ptr))


class CudaRuntime:
    def __init__(self, path: str):
        self.path = path
        # PyDLL: the calls keep the GIL, as ONNX Runtime's own copies do. A CDLL call lets it go
        # for a short copy, and a busy event loop then keeps the executor thread waiting for it
        # for up to the GIL's switch interval.
        self.lib = lib = ctypes.PyDLL(path)
        lib.cudaHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]
        lib.cudaFreeHost.argtypes = [ctypes.c_void_p]
        lib.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        lib.cudaGetErrorString.argtypes = [ctypes.c_int]
        lib.cudaGetErrorString.restype = ctypes.c_char_p

    def check(self, code: int, what: str) -> None:
        if code:
            raise RuntimeError("%s failed: %s (%d)" % (what, self.lib.cudaGetErrorString(code).decode(), code))

    def pinned(self, size: int) -> PinnedArray:
        return PinnedArray(self, max(1, size))

    def to_device(self, device_ptr: int, host: PinnedArray, size: int) -> None:
        # Synchronous: from pinned memory cudaMemcpy returns once the data is on the device, and
        # ONNX Runtime's run has synchronised its stream before it returned.
        self.check(self.lib.cudaMemcpy(device_ptr, host.ptr, size, _HOST_TO_DEVICE), "cudaMemcpy to the device")

    def to_host(self, host: PinnedArray, device_ptr: int, size: int) -> None:
        self.check(self.lib.cudaMemcpy(host.ptr, device_ptr, size, _DEVICE_TO_HOST), "cudaMemcpy to the host")


def runtime() -> CudaRuntime | None:
    """The CUDA runtime ONNX Runtime loaded, once a CUDA InferenceSession exists; None without one."""
    global _runtime
    if _runtime is False:
        path = loaded_cudart()
        if path is None:
            return None  # looked for again later: a CUDA InferenceSession may load it
        try:
            _runtime = CudaRuntime(path)
        except (OSError, AttributeError) as exc:
            log.warning("pinned host buffers off: %s cannot be used: %s", path, exc)
            _runtime = None
    return _runtime if isinstance(_runtime, CudaRuntime) else None
