"""The PM QoS request (app/cpu_latency.py): what it writes, that it lasts while the engine
serves, and that a server without access to the device still serves."""
from __future__ import annotations

import asyncio
import logging
import os
import struct

import httpx
import pytest

from app.config import Settings
from app.cpu_latency import DEVICE, CpuLatency
from tests.conftest import run_server


def test_a_bound_is_written_as_the_kernel_reads_it_and_held_until_released(tmp_path):
    device = tmp_path / "cpu_dma_latency"
    device.write_bytes(b"")
    held = CpuLatency(str(device))
    assert held.hold(0)
    assert device.read_bytes() == struct.pack("i", 0) and held.held_us == 0
    fd = held.fd
    assert os.readlink("/proc/self/fd/%d" % fd) == str(device)     # the request lives while the file is open
    assert held.hold(20)                                            # a second bound replaces it, same file
    assert held.fd == fd and device.read_bytes()[-4:] == struct.pack("i", 20) and held.held_us == 20
    held.release()
    assert held.fd is None and held.held_us is None
    with pytest.raises(OSError):
        os.fstat(fd)
    held.release()                                                  # twice is harmless


def test_no_bound_asked_touches_nothing(tmp_path):
    held = CpuLatency(str(tmp_path / "absent"))
    assert not held.hold(-1)
    assert held.fd is None and not (tmp_path / "absent").exists()


def test_a_device_that_cannot_be_written_is_a_warning_not_a_failure(tmp_path, caplog):
    held = CpuLatency(str(tmp_path / "no" / "such" / "device"))
    with caplog.at_level(logging.WARNING, logger="omni.cpu_latency"):
        assert not held.hold(0)
    assert held.fd is None and held.held_us is None
    assert "OMNI_CPU_DMA_LATENCY_US=0" in caplog.text and "cannot be written" in caplog.text


def test_the_setting():
    assert Settings().cpu_dma_latency_us == -1
    assert Settings.from_env({"OMNI_CPU_DMA_LATENCY_US": "0"}).cpu_dma_latency_us == 0
    with pytest.raises(ValueError, match="cpu_dma_latency_us"):
        Settings(cpu_dma_latency_us=-2)


def test_the_engine_holds_it_from_start_to_stop(tmp_path):
    from app.metrics import Metrics
    from app.runtime.registry import Registry
    from app.serving import Engine

    device = tmp_path / "cpu_dma_latency"
    device.write_bytes(b"")

    async def main(us):
        engine = Engine(Settings(cpu_dma_latency_us=us), Registry([], None), Metrics())
        engine.cpu_latency = CpuLatency(str(device))
        await engine.start()
        during = engine.cpu_latency.fd is not None
        await engine.stop()
        return during, engine.cpu_latency.fd

    assert asyncio.run(main(0)) == (True, None)
    assert device.read_bytes() == struct.pack("i", 0)
    assert asyncio.run(main(-1)) == (False, None)
    assert device.read_bytes() == struct.pack("i", 0)                 # -1 wrote nothing


def _children(pid: int) -> list[int]:
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        return [int(p) for p in f.read().split()]


def test_a_server_asked_for_it_holds_the_device_or_says_why_not(english, tmp_path):
    """Where this machine lets the worker write /dev/cpu_dma_latency, the worker holds it open
    while it serves; where not, the log says why, and the server serves all the same."""
    writable = os.access(DEVICE, os.W_OK)
    with run_server(tmp_path, {"OMNI_MODELS": english[1], "OMNI_CPU_DMA_LATENCY_US": "0"}) as s:
        body = {"model": "english", "state": "I was charged twice.",
                "questions": {"refund": {"type": "noul", "instructions": "Refund?"}}}
        assert httpx.post(s.url + "/v1/systemone", json=body, timeout=30).status_code == 200
        log = s.log()
        if writable:
            assert "CPU wake-up latency held at 0 µs" in log
            workers = _children(s.proc.pid)
            held = [w for w in workers for fd in os.listdir("/proc/%d/fd" % w)
                    if os.path.realpath("/proc/%d/fd/%s" % (w, fd)) == DEVICE]
            assert held, "no worker of %s holds %s" % (workers, DEVICE)
        else:
            assert "OMNI_CPU_DMA_LATENCY_US=0 asked for" in log and "cannot be written" in log
