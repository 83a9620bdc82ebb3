"""How the executor thread waits for the GPU (app/runtime/cuda_sync.py).

CI has no CUDA driver, so the flag arithmetic runs against a host double of the four driver entry
points the module calls (cuInit, cuDeviceGet, cuDevicePrimaryCtxGetState,
cuDevicePrimaryCtxSetFlags), filling the out-parameters as the driver does. On the GPU,
benchmarks/gpu/sync_probe.py measures each mode (docs/benchmarks.md, cudasync session)."""
from __future__ import annotations

import logging

import pytest

from app.config import CUDA_SYNC_MODES, Settings
from app.runtime import cuda_sync


class HostDriver(cuda_sync.Driver):
    """The driver calls cuda_sync.apply makes, on a primary context held in this object."""

    def __init__(self, flags: int = 0, active: int = 0, refuse: int = 0):
        self.flags, self.active, self.refuse, self.calls = flags, active, refuse, []

        def init(flags):
            self.calls.append("cuInit")
            return 0

        def device_get(device, ordinal):
            device._obj.value = ordinal
            return 0

        def get_state(device, flags, active):
            flags._obj.value, active._obj.value = self.flags, self.active
            return 0

        def set_flags(device, flags):
            self.calls.append(("set", device.value, flags))
            if self.refuse:
                return self.refuse
            self.flags = flags
            return 0

        def error_name(code, name):
            name._obj.value = b"CUDA_ERROR_INVALID_VALUE"
            return 0

        self.init, self.device_get, self.get_state, self.set_flags = init, device_get, get_state, set_flags
        self.error_name = error_name


@pytest.fixture(autouse=True)
def fresh():
    cuda_sync._applied.clear()
    yield
    cuda_sync._applied.clear()


def test_modes_match_the_settings():
    assert tuple(cuda_sync.MODES) == CUDA_SYNC_MODES
    assert cuda_sync.MODES == {"auto": 0, "spin": 1, "yield": 2, "blocking": 4}   # cuda.h's CU_CTX_SCHED_*


@pytest.mark.parametrize("mode", ["spin", "yield", "blocking"])
def test_sets_the_scheduling_bits_and_keeps_the_others(mode):
    driver = HostDriver(flags=0x08 | 0x04)          # CU_CTX_MAP_HOST, and a scheduling bit set before
    assert cuda_sync.apply(mode, 1, driver) == mode
    assert driver.flags == 0x08 | cuda_sync.MODES[mode]
    assert driver.calls == ["cuInit", ("set", 1, 0x08 | cuda_sync.MODES[mode])]


def test_auto_leaves_the_driver_alone():
    driver = HostDriver(flags=0x08)
    assert cuda_sync.apply("auto", 0, driver) is None
    assert driver.calls == [] and driver.flags == 0x08


def test_once_per_device():
    driver = HostDriver()
    cuda_sync.apply("blocking", 0, driver)
    assert cuda_sync.apply("blocking", 0, driver) == "blocking (set before)"
    assert len([c for c in driver.calls if c != "cuInit"]) == 1
    cuda_sync.apply("blocking", 1, driver)              # another device is its own context
    assert len([c for c in driver.calls if c != "cuInit"]) == 2


def test_an_active_context_is_said(caplog):
    caplog.set_level(logging.INFO, "omni.cuda_sync")
    note = cuda_sync.apply("spin", 0, HostDriver(active=1))
    assert note.startswith("spin (the context was already active")
    assert "cuda:0 waits for the GPU by spin (the context was already active" in caplog.text


def test_a_refusal_is_logged_and_changes_nothing(caplog):
    driver = HostDriver(flags=0x08, refuse=1)
    assert cuda_sync.apply("spin", 0, driver) is None
    assert driver.flags == 0x08
    assert "OMNI_CUDA_SYNC=spin asked for, but the CUDA driver did not take it" in caplog.text
    assert "cuDevicePrimaryCtxSetFlags failed: CUDA_ERROR_INVALID_VALUE (1)" in caplog.text
    assert cuda_sync._applied == {}                     # tried again at the next session


def test_no_driver_is_a_warning_not_a_failure(monkeypatch, caplog):
    real = cuda_sync.Driver
    monkeypatch.setattr(cuda_sync, "Driver", lambda: real("libcuda-not-here.so.1"))     # a CPU machine
    assert cuda_sync.apply("blocking", 0) is None
    assert "OMNI_CUDA_SYNC=blocking asked for, but the CUDA driver did not take it" in caplog.text
    assert "libcuda-not-here.so.1" in caplog.text


def test_unknown_mode_refused():
    with pytest.raises(ValueError, match="cuda_sync must be one of auto/spin/yield/blocking"):
        cuda_sync.apply("busy", 0, HostDriver())


def test_settings_take_and_check_the_mode():
    assert Settings().cuda_sync == "auto"
    assert Settings.from_env({"OMNI_CUDA_SYNC": "blocking"}).cuda_sync == "blocking"
    with pytest.raises(ValueError, match="cuda_sync must be one of"):
        Settings.from_env({"OMNI_CUDA_SYNC": "sleep"})
