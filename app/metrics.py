"""Prometheus metrics (served at /metrics), one registry per app instance.

Every label value comes from a bounded set the server owns (route templates, model names,
status and problem codes), never from what a client sends.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

if TYPE_CHECKING:
    from app.runtime.executor import BatchInfo

Child = TypeVar("Child", covariant=True)
C = TypeVar("C")


class Labelled(Protocol[Child]):
    """A metric with labels: `labels(*values)` gives the child that one set of values counts into."""

    def labels(self, *values: str) -> Child: ...


_LATENCY = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30)


class LoopHistogram:
    """A labelled histogram written from one thread only (the event loop): an observation is a
    bisect and two additions, with none of prometheus_client's per-bucket locks. Scrapes read it
    through `collect`, as any collector."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: list[str],
        buckets: Iterable[float],
        registry: CollectorRegistry,
    ) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, list(labelnames)
        self.bounds = tuple(float(b) for b in buckets)
        self._children: dict[tuple[str, ...], _LoopHistogramChild] = {}
        registry.register(self)

    def labels(self, *values: str) -> _LoopHistogramChild:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = _LoopHistogramChild(self.bounds)
        return child

    def describe(self) -> list[Metric]:
        return [HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, child in list(self._children.items()):
            counts, total = list(child.counts), child.sum
            buckets, seen = [], 0
            for bound, n in zip(self.bounds, counts[:-1], strict=True):  # the last: past every bound
                seen += n
                buckets.append((floatToGoString(bound), seen))
            buckets.append(("+Inf", seen + counts[-1]))
            family.add_metric(list(values), buckets, total)
        yield family


class _LoopHistogramChild:
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds, self.counts, self.sum = bounds, [0] * (len(bounds) + 1), 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # `le` buckets: value <= bound
        self.sum += value


class _BuildInfo:
    def __init__(self, version: str, onnxruntime: str, device: Callable[[], str]) -> None:
        self.version, self.onnxruntime, self.device = version, onnxruntime, device

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "omni_build_info",
            "The server's version, ONNX Runtime's, and the models' device",
            labels=["version", "onnxruntime", "device"],
        )

    def describe(self) -> list[Metric]:
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        family.add_metric([self.version, self.onnxruntime, self.device()], 1)
        yield family


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        # The process (memory, CPU, file descriptors), Python's garbage collector and version.
        ProcessCollector(registry=r)
        GCCollector(registry=r)
        PlatformCollector(registry=r)
        self.requests = Counter("omni_requests", "HTTP requests", ["route", "model", "status"], registry=r)
        # Observed only by the RequestContext middleware, on the event loop.
        self.latency = LoopHistogram(
            "omni_request_seconds", "Request latency by stage", ["stage", "model"], _LATENCY, r
        )
        self.duration = LoopHistogram(
            "omni_request_duration_seconds",
            "Decision requests from arrival to answer, by model and HTTP status code",
            ["model", "code"],
            _LATENCY,
            r,
        )
        self.queue_depth = Gauge("omni_queue_depth", "Requests waiting for the executor", registry=r)
        self.batch_requests = Histogram(
            "omni_batch_requests",
            "Requests per forward pass",
            ["model"],
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            registry=r,
        )
        self.batch_rows = Histogram(
            "omni_batch_rows",
            "Rows per forward pass",
            ["model"],
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
            registry=r,
        )
        self.padded_tokens = Histogram(
            "omni_batch_padding_tokens",
            "Padding tokens per forward pass",
            ["model"],
            buckets=(0, 16, 64, 256, 1024, 4096, 16384, 65536),
            registry=r,
        )
        # The ORT session's runs of one pass, wall time: what it holds beyond the device's own time
        # for the pass is the executor thread waiting for the GIL.
        self.batch_forward = Histogram(
            "omni_batch_forward_seconds",
            "Wall time of a forward pass's ONNX Runtime session runs (device work and the wait for the GIL after it)",
            ["model"],
            buckets=_LATENCY,
            registry=r,
        )
        self.input_tokens = Counter("omni_input_tokens", "Real input tokens served", ["model"], registry=r)
        # What the passes ran, against what was served: a prompt head a pass's rows share runs
        # once but each row's usage counts it, so this falls below omni_input_tokens there.
        self.run_tokens = Counter(
            "omni_batch_run_tokens",
            "Real (unpadded) tokens the forward passes ran; a prompt head shared by a pass's rows counts once",
            ["model"],
            registry=r,
        )
        self.decisions = Counter("omni_decisions", "Questions answered", ["model"], registry=r)
        self.errors = Counter("omni_errors", "Problem responses by stable code", ["code", "status"], registry=r)
        self.ready = Gauge("omni_model_ready", "1 when the model is warm and serving", ["model"], registry=r)
        self.dropped = Counter(
            "omni_dropped", "Queued requests dropped unrun (deadline, disconnect)", ["model"], registry=r
        )
        self.disconnects = Counter("omni_client_disconnects", "Clients gone before their answer", registry=r)
        self.executor_failures = Counter(
            "omni_executor_failures",
            "Failed forward passes (each half of a failed pass run again counts too)",
            ["model"],
            registry=r,
        )
        self.recoveries = Counter(
            "omni_model_recoveries",
            "Times a model out of service was rebuilt and warmed up again",
            ["model"],
            registry=r,
        )
        self.graph_captures = Counter(
            "omni_cuda_graph_captures", "CUDA graphs captured (one per batch shape)", ["model"], registry=r
        )
        self.graph_capture_seconds = Counter(
            "omni_cuda_graph_capture_seconds",
            "Time spent capturing CUDA graphs, as the model loaded or between passes",
            ["model"],
            registry=r,
        )

        # Full collections of Python's garbage collector stop the whole worker (app/gc_pauses.py).
        self.gc_full_collections = Histogram(
            "omni_gc_full_collection_seconds",
            "Pause of each full collection of Python's cyclic garbage collector",
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1),
            registry=r,
        )

        # Labelled children, looked up once: `labels()` validates and locks on every call.
        # Each metric's child for a set of label values, of whichever type that metric's are.
        self._children: dict[tuple[object, tuple[str, ...]], Any] = {}

    def child(self, metric: Labelled[C], *labels: str) -> C:
        key = (metric, labels)
        c: C | None = self._children.get(key)
        if c is None:
            c = self._children[key] = metric.labels(*labels)
        return c

    def observe_request(
        self, route: str, model: str, status: int, stages: dict[str, float] | None, total: float | None = None
    ) -> None:
        """One answered HTTP request: its count by route template, model and status, and for
        decisions the duration of each stage it went through and its whole duration (`total`)."""
        code = str(status)
        self.child(self.requests, route, model, code).inc()
        if stages:
            for stage, seconds in stages.items():
                self.child(self.latency, stage, model).observe(seconds)
        if total is not None:
            self.child(self.duration, model, code).observe(total)

    def build_info(self, version: str, onnxruntime: str, device: Callable[[], str]) -> None:
        """`omni_build_info`: 1, labelled with the server's version, ONNX Runtime's and the
        device its models run on (`device()`, read at each scrape: it is known once they load)."""
        self.registry.register(_BuildInfo(version, onnxruntime, device))

    def observe_batch(self, info: BatchInfo) -> None:
        self.child(self.batch_requests, info.model).observe(info.size)
        self.child(self.batch_rows, info.model).observe(info.rows)
        self.child(self.padded_tokens, info.model).observe(info.padded_tokens - info.real_tokens)
        self.child(self.run_tokens, info.model).inc(info.real_tokens)
        self.child(self.batch_forward, info.model).observe(info.forward_s)

    def observe_captures(self, model: str, graphs: int, seconds: float) -> None:
        """CUDA graphs captured as the model loaded (precapture), or between passes."""
        self.child(self.graph_captures, model).inc(graphs)
        self.child(self.graph_capture_seconds, model).inc(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
