"""Prometheus metrics (served at /metrics), one registry per app instance."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_LATENCY = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter("omni_requests", "HTTP requests", ["route", "model", "status"], registry=r)
        self.latency = Histogram("omni_request_seconds", "Request latency by stage", ["stage", "model"],
                                 buckets=_LATENCY, registry=r)
        self.queue_depth = Gauge("omni_queue_depth", "Requests waiting for the executor", registry=r)
        self.batch_requests = Histogram("omni_batch_requests", "Requests per forward pass", ["model"],
                                        buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256), registry=r)
        self.batch_rows = Histogram("omni_batch_rows", "Rows per forward pass", ["model"],
                                    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), registry=r)
        self.padded_tokens = Histogram("omni_batch_padding_tokens", "Padding tokens per forward pass",
                                       ["model"], buckets=(0, 16, 64, 256, 1024, 4096, 16384, 65536),
                                       registry=r)
        self.input_tokens = Counter("omni_input_tokens", "Real input tokens served", ["model"], registry=r)
        self.decisions = Counter("omni_decisions", "Questions answered", ["model"], registry=r)
        self.errors = Counter("omni_errors", "Problem responses by stable code", ["code", "status"], registry=r)
        self.ready = Gauge("omni_model_ready", "1 when the model is warm and serving", ["model"], registry=r)
        self.dropped = Counter("omni_dropped", "Queued requests dropped unrun (deadline, disconnect)", ["model"],
                               registry=r)
        self.disconnects = Counter("omni_client_disconnects", "Clients gone before their answer", registry=r)
        self.executor_failures = Counter("omni_executor_failures", "Failed forward passes", ["model"],
                                         registry=r)

        # Labelled children, looked up once: `labels()` validates and locks on every call.
        self._children: dict[tuple, object] = {}

    def child(self, metric, *labels: str):
        key = (metric, labels)
        c = self._children.get(key)
        if c is None:
            c = self._children[key] = metric.labels(*labels)
        return c

    def observe_request(self, route: str, model: str, status: int, stages: dict[str, float] | None) -> None:
        """One answered HTTP request: its count by route, model and status, and for decisions the
        duration of each stage it went through."""
        self.child(self.requests, route, model, str(status)).inc()
        if stages:
            for stage, seconds in stages.items():
                self.child(self.latency, stage, model).observe(seconds)

    def observe_batch(self, info) -> None:
        self.child(self.batch_requests, info.model).observe(info.size)
        self.child(self.batch_rows, info.model).observe(info.rows)
        self.child(self.padded_tokens, info.model).observe(info.padded_tokens - info.real_tokens)

    def render(self) -> bytes:
        return generate_latest(self.registry)
