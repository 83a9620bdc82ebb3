"""Python's cyclic garbage collector, kept off the tail latency.

A full (oldest-generation) collection stops the whole worker while it walks every tracked object:
the event loop, the executor thread and every request in flight wait for it. Most of those
objects are the server's own and live as long as it does (modules, the app, the models' Python
state). Once the models are warm they are frozen out of collection (`gc.freeze`), so a full
collection walks only what requests left behind. Each full collection's pause is a metric.
"""

from __future__ import annotations

import gc
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client import Histogram


def freeze() -> int:
    """Collect what is garbage now, then move every object left into the permanent generation,
    which collections skip: returns how many were frozen. A frozen object still goes when its
    last reference does (and leaves the count); what collections alone would free stays."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def unfreeze() -> None:
    """Return the frozen objects to the oldest generation, where collections see them again."""
    gc.unfreeze()


class FullCollections:
    """Observes the pause of each full collection into `histogram` (seconds), from gc.callbacks.

    The callbacks run in whichever thread's allocation set the collection off, with the GIL held
    and collections never nested, so one start time serves. `histogram` must take observations
    from any thread (prometheus_client's does)."""

    def __init__(self, histogram: Histogram) -> None:
        self.histogram, self._t0 = histogram, 0.0

    def start(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def stop(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._t0 = time.perf_counter()
        elif self._t0:
            self.histogram.observe(time.perf_counter() - self._t0)
            self._t0 = 0.0
