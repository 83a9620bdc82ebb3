"""Hold the kernel's CPU wake-up latency bound (PM QoS, `/dev/cpu_dma_latency`) while serving.

At low load each request's host work lands on threads that slept through the forward pass: the
event loop, the executor and Granian's network threads each wake from an idle core. An idle core
that may enter a deep idle state (or, in a VM, halt to the hypervisor) wakes slowly, and its
caches come back cold. Writing a bound in µs to `/dev/cpu_dma_latency` and keeping the file open
tells the kernel's idle governor not to use any state slower to leave than that; 0 makes idle
cores poll. The kernel drops the request when the file is closed, so it lasts exactly as long as
the holder: here, from the engine's start to its stop. Idle cores then burn power, which is why
it is opt-in (`OMNI_CPU_DMA_LATENCY_US`). It needs write access to the device (root; in a
container, the device passed in).
"""
from __future__ import annotations

import logging
import os
import struct

log = logging.getLogger("omni.cpu_latency")

DEVICE = "/dev/cpu_dma_latency"


class CpuLatency:
    """One PM QoS request, held from `hold` until `release`."""

    def __init__(self, device: str = DEVICE):
        self.device = device
        self.fd: int | None = None
        self.held_us: int | None = None

    def hold(self, us: int) -> bool:
        """Ask for idle states that wake within `us` µs; False (logged) where the device cannot
        be written. A second call replaces the bound."""
        if us < 0:
            return False
        try:
            if self.fd is None:
                self.fd = os.open(self.device, os.O_WRONLY | os.O_CLOEXEC)
            # The device takes a native 32-bit integer (or its decimal text; the binary form is
            # the one every kernel since PM QoS's start reads).
            os.write(self.fd, struct.pack("i", us))
        except OSError as exc:
            self.release()
            log.warning("OMNI_CPU_DMA_LATENCY_US=%d asked for, but %s cannot be written (%s): idle cores "
                        "keep the kernel's own choice. It needs root; in a container, pass the device in "
                        "(docs/deployment.md)", us, self.device, exc.strerror or exc)
            return False
        self.held_us = us
        log.info("CPU wake-up latency held at %d µs while serving (%s): idle cores %s", us, self.device,
                 "poll instead of sleeping" if us == 0 else "stay in states that wake within it")
        return True

    def release(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            finally:
                self.fd, self.held_us = None, None
