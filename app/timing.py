"""Per-request stage durations: the W3C Server-Timing header on every response, and, when
tracing is on, one child span per stage of the request's span (the same clock readings)."""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from app.tracing import Tracing

STAGES = ("decode", "prepare", "queue", "infer", "finish")


class Timing:
    __slots__ = ("start", "stages", "tracing", "span", "model")

    def __init__(self, tracing: Tracing | None = None, span: Span | None = None) -> None:
        self.start = time.perf_counter()
        self.stages: dict[str, float] = {}
        self.tracing, self.span = tracing, span
        self.model = ""  # the served model's name, once the request has resolved it

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def add(self, stage: str, seconds: float) -> None:
        self.stages[stage] = self.stages.get(stage, 0.0) + seconds

    def stage(self, name: str) -> _Stage:
        return _Stage(self, name)

    def record(self, name: str, start_ns: int, end_ns: int) -> None:
        """A stage measured elsewhere (the queue wait, timed by the executor)."""
        self.add(name, (end_ns - start_ns) / 1e9)
        if self.tracing is not None and self.span is not None:
            self.tracing.child(self.span, name, start_time=start_ns).end(end_time=end_ns)

    def header(self, total: float | None = None) -> str:
        """`total`: the seconds since the start, where the caller has read them already."""
        parts = ["%s;dur=%.3f" % (name, self.stages[name] * 1000.0) for name in STAGES if name in self.stages]
        parts.append("total;dur=%.3f" % ((self.elapsed() if total is None else total) * 1000.0))
        return ", ".join(parts)


class _Stage:
    __slots__ = ("timing", "name", "t0", "span")

    def __init__(self, timing: Timing, name: str):
        self.timing, self.name = timing, name
        self.span: Span | None = None

    def __enter__(self) -> _Stage:
        t = self.timing
        if t.tracing is not None and t.span is not None:
            self.span = t.tracing.child(t.span, self.name)
        self.t0 = time.perf_counter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        self.timing.add(self.name, time.perf_counter() - self.t0)
        if self.span is not None:
            if exc is not None:
                self.span.record_exception(exc)
            self.span.end()
        return False
