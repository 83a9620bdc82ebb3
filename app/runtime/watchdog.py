"""Seeing a hung executor: a pass or capture that runs far past what its model's passes take.

The executor thread tells the watchdog what it starts (`begin`) and when it ends (`end`). A pass
is hung once it has run `HUNG_FACTOR` times its model's slowest pass so far, or `HUNG_FLOOR_S`,
whichever is more, and never past the ceiling (`OMNI_PASS_TIMEOUT_S`); before a model's first
pass ends, and for captures, only the ceiling applies. `/livez` fails while one is hung, so the
orchestrator restarts a server whose device stopped answering; the watchdog's own thread logs
once which requests the hung pass holds, whether or not anything probes.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from collections.abc import Sequence

log = logging.getLogger("omni.watchdog")

HUNG_FACTOR = 20  # a pass this many times its model's slowest is hung
HUNG_FLOOR_S = 5.0  # ... but never under this: a first long request or a busy host is not a hang


@dataclass(frozen=True)
class Busy:
    """What the executor thread is running now."""

    what: str  # "forward pass" or "CUDA graph capture"
    model: str
    requests: tuple[str, ...]
    started: float  # time.perf_counter()


class Watchdog:
    def __init__(self, ceiling_s: float, interval_s: float = 0.25):
        self.ceiling_s, self.interval_s = ceiling_s, interval_s
        self.slowest: dict[str, float] = {}  # model → its slowest pass that ended, seconds
        self._busy: Busy | None = None
        self._reported: Busy | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="omni-watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def begin(self, what: str, model: str, requests: Sequence[str | None] = ()) -> None:
        self._busy = Busy(what, model, tuple(r or "-" for r in requests), time.perf_counter())

    def end(self, passed: bool = True) -> None:
        """The work begun last has ended; a pass that `passed` counts towards its model's bound."""
        busy, self._busy = self._busy, None
        if busy is not None and passed and busy.what == "forward pass":
            took = time.perf_counter() - busy.started
            if took > self.slowest.get(busy.model, 0.0):
                self.slowest[busy.model] = took
        if busy is not None and busy is self._reported:
            log.warning(
                "the %s for model %s that was taken as hung ended after %.1f s",
                busy.what,
                busy.model,
                time.perf_counter() - busy.started,
            )

    def bound(self, busy: Busy) -> float:
        """Seconds after which `busy` is hung."""
        slowest = self.slowest.get(busy.model) if busy.what == "forward pass" else None
        if slowest is None:
            return self.ceiling_s
        return min(self.ceiling_s, max(HUNG_FLOOR_S, HUNG_FACTOR * slowest))

    def hung(self) -> str | None:
        """Why the executor is taken as hung, or None."""
        busy = self._busy
        if busy is None:
            return None
        took, bound = time.perf_counter() - busy.started, self.bound(busy)
        if took <= bound:
            return None
        shown = ", ".join(busy.requests[:8]) + (
            "" if len(busy.requests) <= 8 else " and %d more" % (len(busy.requests) - 8)
        )
        return "a %s for model %s has run %.1f s, past its bound of %.1f s (requests: %s)" % (
            busy.what,
            busy.model,
            took,
            bound,
            shown or "none",
        )

    def _watch(self) -> None:
        while not self._stop.wait(self.interval_s):
            busy, why = self._busy, self.hung()
            if why is not None and busy is not self._reported:
                self._reported = busy
                log.critical("the executor looks hung: %s; /livez fails until it ends", why)
