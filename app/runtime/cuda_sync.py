"""How the executor thread waits for the GPU: the scheduling flag of the device's primary context.

ONNX Runtime's run ends in a CUDA synchronize, and how the calling thread waits there is the
context's choice: spin on a core, spin yielding it, or sleep on an interrupt. `auto` leaves it
to CUDA, whose heuristic spins with fewer active contexts than cores. On the H200 machine `auto`
spins already (the thread's CPU time is 94-98% of a run), and `blocking` gives the core back for
~0.3 ms more a pass; either way the host step after a run costs 1.5-1.7x its warm time
(docs/benchmarks.md, cudasync session). So `blocking` is for a host that needs the core more.

ONNX Runtime uses the primary context through the CUDA runtime, so the flag is set through the
driver API (`libcuda.so.1`, present wherever the GPU is) on the primary context before the first
session creates it. Where the context is active already, the log says so: when the driver
applies the change then is not measured here.
"""
from __future__ import annotations

import ctypes
import logging

log = logging.getLogger("omni.cuda_sync")

# CUctx_flags' scheduling bits (cuda.h); `auto` is CU_CTX_SCHED_AUTO.
MODES = {"auto": 0, "spin": 1, "yield": 2, "blocking": 4}
_SCHED_MASK = 0x07

_applied: dict[int, str] = {}


class Driver:
    """The few driver API calls this needs, from `libcuda.so.1`."""

    def __init__(self, path: str = "libcuda.so.1"):
        lib = ctypes.CDLL(path)
        self.init = lib.cuInit
        self.device_get = lib.cuDeviceGet
        self.get_state = lib.cuDevicePrimaryCtxGetState
        self.set_flags = getattr(lib, "cuDevicePrimaryCtxSetFlags_v2", None) or lib.cuDevicePrimaryCtxSetFlags
        self.error_name = lib.cuGetErrorName
        self.error_name.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]

    def check(self, code: int, what: str) -> None:
        if code != 0:
            name = ctypes.c_char_p()
            self.error_name(code, ctypes.byref(name))
            raise OSError("%s failed: %s (%d)" % (what, (name.value or b"?").decode(), code))


def apply(mode: str, device_id: int = 0, driver: Driver | None = None) -> str | None:
    """Set `mode` (MODES) as the scheduling flag of device `device_id`'s primary context, keeping
    its other flags. Returns what was done, for the log and /readyz, or None where nothing was:
    `auto` (CUDA's own choice), no driver (a CPU machine), or the driver refused (logged)."""
    if mode not in MODES:
        raise ValueError("cuda_sync must be one of %s, got %r" % ("/".join(MODES), mode))
    if mode == "auto":
        return None
    if _applied.get(device_id) == mode:
        return "%s (set before)" % mode
    try:
        driver = driver or Driver()
        driver.check(driver.init(0), "cuInit")
        device = ctypes.c_int()
        driver.check(driver.device_get(ctypes.byref(device), device_id), "cuDeviceGet")
        flags, active = ctypes.c_uint(), ctypes.c_int()
        driver.check(driver.get_state(device, ctypes.byref(flags), ctypes.byref(active)),
                     "cuDevicePrimaryCtxGetState")
        driver.check(driver.set_flags(device, (flags.value & ~_SCHED_MASK) | MODES[mode]),
                     "cuDevicePrimaryCtxSetFlags")
    except (OSError, AttributeError) as exc:
        log.warning("OMNI_CUDA_SYNC=%s asked for, but the CUDA driver did not take it (%s): CUDA "
                    "keeps its own choice", mode, exc)
        return None
    _applied[device_id] = mode
    note = mode if not active.value else "%s (the context was already active)" % mode
    log.info("cuda:%d waits for the GPU by %s", device_id, note)
    return note
