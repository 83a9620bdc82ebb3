"""When a model out of service is rebuilt: backoff between attempts, and when to give up on the
process.

A model is out of service (`SlotState.FAILED`) only when its sessions cannot be created, or its
own known-good warm-up request fails (at start, after a rebuild, or run alone after a failed
pass): never for what a client sent. The executor thread then rebuilds its sessions after a
delay that doubles with each attempt (`FIRST_S`, up to `MAX_S`), and the engine warms it up
again through the whole path. After `ATTEMPTS` rebuilds in a row that did not bring it back,
`/livez` fails: what a rebuild cannot mend (a device lost, a CUDA context poisoned by a sticky
error) takes a new process.
"""

from __future__ import annotations

from dataclasses import dataclass

FIRST_S = 1.0  # the first rebuild's delay
MAX_S = 30.0  # the longest delay between rebuilds
ATTEMPTS = 3  # rebuilds in a row that did not bring the model back, before /livez fails


@dataclass
class Recovery:
    attempts: int = 0  # rebuilds since the model was last ready
    due: float | None = None  # when the next one starts (time.perf_counter()), while out of service

    def schedule(self, now: float) -> float:
        """Set the next rebuild's time; returns its delay in seconds."""
        delay = min(MAX_S, FIRST_S * 2.0**self.attempts)
        self.due = now + delay
        return delay

    @property
    def exhausted(self) -> bool:
        return self.attempts >= ATTEMPTS
