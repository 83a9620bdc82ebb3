"""app.metrics: the event loop's lock-free histogram exposes what prometheus_client's would."""

from __future__ import annotations

import random

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from app.metrics import _LATENCY, Metrics


def _samples(text: bytes, name: str) -> list[str]:
    return sorted(line for line in text.decode().splitlines() if line.startswith(name) and "_created" not in line)


def test_loop_histogram_matches_prometheus_client():
    registry = CollectorRegistry()
    reference = Histogram(
        "omni_request_seconds", "Request latency by stage", ["stage", "model"], buckets=_LATENCY, registry=registry
    )
    metrics = Metrics()
    rnd = random.Random(0)
    for _ in range(3000):
        # bucket bounds exactly, values between, beyond the last bound, zero
        value = rnd.choice([rnd.random() * 0.05, 0.001, 0.0005, 30.0, 31.0, 0.0, rnd.random() * 40])
        labels = (rnd.choice(["infer", "total", "queue"]), rnd.choice(["english", "cua"]))
        reference.labels(*labels).observe(value)
        metrics.child(metrics.latency, *labels).observe(value)
    ours = _samples(metrics.render(), "omni_request_seconds")
    assert len(ours) == 6 * (len(_LATENCY) + 3)  # buckets, +Inf, _count, _sum per child
    assert ours == _samples(generate_latest(registry), "omni_request_seconds")


def test_observe_request_counts_and_times():
    metrics = Metrics()
    metrics.observe_request("/v1/systemone", "english", 200, {"infer": 0.003, "total": 0.004})
    metrics.observe_request("/v1/systemone", "english", 422, None)
    text = metrics.render().decode()
    assert 'omni_requests_total{model="english",route="/v1/systemone",status="200"} 1.0' in text
    assert 'omni_requests_total{model="english",route="/v1/systemone",status="422"} 1.0' in text
    assert 'omni_request_seconds_bucket{le="0.005",model="english",stage="infer"} 1.0' in text
    assert 'omni_request_seconds_count{model="english",stage="total"} 1.0' in text


def test_graphs_captured_as_a_model_loads_count_with_those_captured_between_passes():
    from app.runtime.executor import BatchInfo

    metrics = Metrics()
    metrics.observe_captures("english", 218, 11.8)  # precapture, from the load
    metrics.observe_batch(BatchInfo("english", 1, 1, 48, 64, "cuda:0", 0.0, 0.001, {}, 0.0008))
    metrics.observe_captures("english", 1, 0.05)  # one, while the queue was empty
    metrics.observe_batch(BatchInfo("english", 1, 1, 48, 64, "cuda:0", 0.0, 0.001, {}, 0.0015))
    text = metrics.render().decode()
    assert 'omni_batch_forward_seconds_bucket{le="0.001",model="english"} 1.0' in text
    assert 'omni_batch_forward_seconds_sum{model="english"} 0.0023' in text
    assert 'omni_cuda_graph_captures_total{model="english"} 219.0' in text
    assert 'omni_cuda_graph_capture_seconds_total{model="english"} 11.850' in text


def test_the_engine_counts_each_capture_its_executor_reports():
    """The executor reports each capture it makes between passes (`on_capture`); the engine
    counts it under the model's name."""
    from types import SimpleNamespace

    from app.config import Settings
    from app.runtime.registry import Registry
    from app.serving import Engine

    metrics = Metrics()
    engine = Engine(Settings(), Registry([]), metrics)
    engine.executor._on_capture(SimpleNamespace(name="english"), 0.05)
    engine.executor._on_capture(SimpleNamespace(name="english"), 0.07)
    text = metrics.render().decode()
    assert 'omni_cuda_graph_captures_total{model="english"} 2.0' in text
    assert 'omni_cuda_graph_capture_seconds_total{model="english"} 0.12' in text
