"""Per-request stage durations, reported as a W3C Server-Timing header on every response."""
from __future__ import annotations

import time

STAGES = ("decode", "prepare", "queue", "infer", "finish")


class Timing:
    __slots__ = ("start", "stages")

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.stages: dict[str, float] = {}

    def add(self, stage: str, seconds: float) -> None:
        self.stages[stage] = self.stages.get(stage, 0.0) + seconds

    def stage(self, name: str) -> "_Stage":
        return _Stage(self, name)

    def header(self) -> str:
        parts = ["%s;dur=%.3f" % (name, self.stages[name] * 1000.0) for name in STAGES if name in self.stages]
        parts.append("total;dur=%.3f" % ((time.perf_counter() - self.start) * 1000.0))
        return ", ".join(parts)


class _Stage:
    __slots__ = ("timing", "name", "t0")

    def __init__(self, timing: Timing, name: str):
        self.timing, self.name = timing, name

    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.timing.add(self.name, time.perf_counter() - self.t0)
        return False
