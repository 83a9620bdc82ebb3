"""The executor thread's bounded spin before it sleeps for work (Settings.executor_spin_us).

Between requests at low load the executor thread sleeps in `Condition.wait`, its core idles, and
the next request's wake-up costs more the longer it slept: on the H200 machine (a VM without a
cpuidle driver) Server-Timing's `queue` at c=1 is bimodal, ~0.04 ms at best but over 0.12 ms for
36-64% of Cua-S1's requests and 68-93% of Open-Jev's, whose gaps are longer (docs/benchmarks.md,
uvloop session). Spinning keeps the core awake for a while after each pass instead.

The spin must leave the GIL to the event loop, which prepares the next request meanwhile: each
turn is a CRC over 16 KiB, which `zlib` computes without the GIL (~5 µs), and the GIL is held
only to look at the queue between turns. A pure-Python spin would halve the loop's share.
"""
from __future__ import annotations

import time
import zlib
from typing import Callable

# zlib lets go of the GIL for data over 5 KiB; 16 KiB is ~5 µs a turn on the development machine.
_BLOCK = bytes(16 * 1024)


def spin(ready: Callable[[], object], seconds: float) -> bool:
    """Spin until `ready()` is true (True) or `seconds` have passed (False)."""
    deadline = time.perf_counter() + seconds
    while not ready():
        if time.perf_counter() >= deadline:
            return False
        zlib.crc32(_BLOCK)
    return True
