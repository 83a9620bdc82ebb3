"""Traces: the span tree per request, the batch span and its links, traceparent, error classes,
Server-Timing agreeing with the spans; and spans reaching a real OTLP/HTTP receiver."""

from __future__ import annotations

import asyncio
import http.server
import re
import threading
import time

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from app.config import Settings
from app.main import create_app
from tests.app.test_http import BODY, timing
from tests.conftest import run_server

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = "00-%s-00f067aa0ba902b7-01" % TRACE_ID


@pytest.fixture
def traced(english):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = create_app(Settings(models=(english[1],)), tracer_provider=provider)
    return app, exporter


async def _with_client(app, fn):
    """Run the app's lifespan and `fn(client)` on this event loop, requests truly concurrent."""
    queue: asyncio.Queue = asyncio.Queue()
    sent: list = []
    await queue.put({"type": "lifespan.startup"})

    async def receive():
        return await queue.get()

    async def send(message):
        sent.append(message)

    lifespan = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send))
    while not any(m["type"].startswith("lifespan.startup.") for m in sent):
        await asyncio.sleep(0.01)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://omni") as client:
            for _ in range(600):
                if (await client.get("/readyz")).status_code == 200:
                    break
                await asyncio.sleep(0.05)
            return await fn(client)
    finally:
        await queue.put({"type": "lifespan.shutdown"})
        await lifespan


def _spans_of(exporter, trace_id: int):
    return [s for s in exporter.get_finished_spans() if s.context.trace_id == trace_id]


def test_span_tree_of_a_request(traced):
    app, exporter = traced
    exporter.clear()

    async def go(client):
        return await client.post(
            "/v1/systemone", json=BODY, headers={"traceparent": TRACEPARENT, "x-request-id": "trace-me"}
        )

    r = asyncio.run(_with_client(app, go))
    assert r.status_code == 200
    spans = _spans_of(exporter, int(TRACE_ID, 16))
    by_name = {s.name: s for s in spans}
    root = by_name["POST /v1/systemone"]
    assert root.kind == SpanKind.SERVER
    assert root.parent.span_id == 0x00F067AA0BA902B7  # continues the caller's trace
    assert root.attributes["omni.request_id"] == "trace-me"
    assert root.attributes["omni.model"] == "english"
    assert root.attributes["omni.questions"] == 3
    assert root.attributes["omni.input_tokens"] == r.json()["usage"]["input_tokens"]
    assert root.attributes["http.response.status_code"] == 200
    for name in ("decode", "prepare", "queue", "finish", "execute"):
        assert by_name[name].parent.span_id == root.context.span_id, name
    execute = by_name["execute"]
    assert any(link.context.span_id == root.context.span_id for link in execute.links)
    assert execute.attributes["omni.batch.rows"] >= 3
    assert execute.attributes["omni.batch.padded_tokens"] >= execute.attributes["omni.batch.real_tokens"]
    assert execute.attributes["omni.device"] == "cpu"
    # Server-Timing reports the same stages the spans measured.
    st = timing(r)
    for name in ("decode", "prepare", "queue", "finish"):
        span_ms = (by_name[name].end_time - by_name[name].start_time) / 1e6
        assert abs(span_ms - st[name]) <= 1.0 + 0.2 * span_ms, (name, span_ms, st[name])
    exec_ms = (execute.end_time - execute.start_time) / 1e6
    assert abs(exec_ms - st["infer"]) <= 2.0 + 0.2 * exec_ms


def test_error_classes_are_on_the_span(traced, english):
    app, exporter = traced
    exporter.clear()
    cases = [
        (b"{", 400, "malformed_request"),
        (b'{"state": "x", "questions": {"q": {"type": "nope"}}}', 422, "invalid_question"),
        (b'{"model": "zzz", "state": "x", "questions": {}}', 422, "unknown_model"),
    ]

    async def go(client):
        out = []
        for i, (content, _, _) in enumerate(cases):
            tp = "00-%032x-00f067aa0ba902b7-01" % (i + 1)
            out.append(
                await client.post(
                    "/v1/systemone", content=content, headers={"content-type": "application/json", "traceparent": tp}
                )
            )
        return out

    responses = asyncio.run(_with_client(app, go))
    for i, ((_, status, code), r) in enumerate(zip(cases, responses)):
        assert r.status_code == status
        root = [s for s in _spans_of(exporter, i + 1) if s.kind == SpanKind.SERVER][0]
        assert root.attributes["omni.error.code"] == code
        assert root.attributes["http.response.status_code"] == status
    decode = [s for s in _spans_of(exporter, 1) if s.name == "decode"][0]
    assert decode.events and decode.events[0].name == "exception"


def test_inference_failure_marks_spans_as_errors(english):
    from tests.app.test_executor import _FailingOnce

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = create_app(Settings(models=(english[1],)), tracer_provider=provider)

    async def go(client):
        slot = app.state.omni.registry.slots[0]
        slot.session = _FailingOnce(slot.session)
        bad = await client.post("/v1/systemone", json=BODY)
        good = await client.post("/v1/systemone", json=BODY)
        return bad, good

    bad, good = asyncio.run(_with_client(app, go))
    assert bad.status_code == 500 and bad.json()["code"] == "inference_failed" and good.status_code == 200
    failed = [s for s in exporter.get_finished_spans() if s.status.status_code == StatusCode.ERROR]
    assert {s.name for s in failed} == {"POST /v1/systemone", "execute"}
    root = [s for s in failed if s.name == "POST /v1/systemone"][0]
    assert any(e.name == "exception" for e in root.events)


class _SlowFirst:
    """A real session whose first run takes half a second longer, so later requests queue."""

    def __init__(self, session):
        self.session, self.first = session, True

    def run(self, *args, **kwargs):
        if self.first:
            self.first = False
            time.sleep(0.5)
        return self.session.run(*args, **kwargs)


def test_a_request_not_sampled_makes_no_spans_and_still_gets_server_timing(traced):
    """A caller's unsampled traceparent (flags 00) is honoured: nothing of the request is recorded,
    no stage spans and no batch span, while its Server-Timing is whole. A sampled request served
    in the same batch still gets its batch span, linked to it alone."""
    app, exporter = traced
    exporter.clear()
    unsampled = "00-%s-00f067aa0ba902b7-00" % ("1" * 32)

    async def go(client):
        slot = app.state.omni.registry.slots[0]
        slot.session = _SlowFirst(slot.session)  # the two below queue up into one batch
        first = asyncio.create_task(client.post("/v1/systemone", json=BODY))
        await asyncio.sleep(0.05)
        return await asyncio.gather(
            first,
            client.post("/v1/systemone", json=BODY, headers={"traceparent": unsampled}),
            client.post("/v1/systemone", json=BODY, headers={"traceparent": TRACEPARENT}),
        )

    responses = asyncio.run(_with_client(app, go))
    assert [r.status_code for r in responses] == [200, 200, 200]
    assert not _spans_of(exporter, int("1" * 32, 16))
    assert set(timing(responses[1])) >= {"decode", "prepare", "queue", "infer", "finish", "total"}
    root = next(s for s in _spans_of(exporter, int(TRACE_ID, 16)) if s.kind == SpanKind.SERVER)
    executes = [
        s
        for s in exporter.get_finished_spans()
        if s.name == "execute" and any(link.context.span_id == root.context.span_id for link in s.links)
    ]
    assert len(executes) == 1 and executes[0].parent.span_id == root.context.span_id
    assert executes[0].attributes["omni.batch.requests"] == 2 and len(executes[0].links) == 1


def test_batch_span_links_every_request(traced):
    app, exporter = traced
    exporter.clear()

    async def go(client):
        slot = app.state.omni.registry.slots[0]
        slot.session = _SlowFirst(slot.session)  # the rest queue up behind the first batch
        return await asyncio.gather(*(client.post("/v1/systemone", json=BODY) for _ in range(12)))

    responses = asyncio.run(_with_client(app, go))
    assert all(r.status_code == 200 for r in responses)
    spans = exporter.get_finished_spans()
    roots = {s.context.span_id for s in spans if s.kind == SpanKind.SERVER}
    executes = [s for s in spans if s.name == "execute"]
    linked = {link.context.span_id for s in executes for link in s.links}
    assert roots <= linked  # every request is linked
    assert any(len(s.links) > 1 for s in executes)  # and some batches served several
    for s in executes:
        assert s.attributes["omni.batch.requests"] == len(s.links)


def test_health_routes_are_not_traced(traced):
    app, exporter = traced
    exporter.clear()

    async def go(client):
        for path in ("/livez", "/readyz", "/metrics"):
            assert (await client.get(path)).status_code == 200

    asyncio.run(_with_client(app, go))
    assert exporter.get_finished_spans() == ()


class _Receiver(http.server.BaseHTTPRequestHandler):
    requests: list = []

    def do_POST(self):
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        body = self.rfile.read(int(self.headers["content-length"]))
        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        type(self).requests.append((self.path, message))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.end_headers()
        self.wfile.write(b"")

    def log_message(self, *args):
        pass


def otlp_receiver():
    """A running OTLP/HTTP receiver with its own list of received export requests."""
    handler = type("Receiver", (_Receiver,), {"requests": []})
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    return receiver, handler


def test_spans_reach_a_real_otlp_receiver(english, tmp_path):
    receiver, _Receiver = otlp_receiver()
    env = {
        "OMNI_MODELS": english[1],
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:%d" % receiver.server_port,
        "OTEL_RESOURCE_ATTRIBUTES": "service.name=omni%20under%20test,deployment.environment=test",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    try:
        with run_server(tmp_path, env) as s:
            r = httpx.post(s.url + "/v1/systemone", json=BODY, headers={"traceparent": TRACEPARENT})
            assert r.status_code == 200
            # A request of its own trace (no traceparent; the default sampler samples it).
            own = httpx.post(s.url + "/v1/systemone", json=BODY, headers={"x-request-id": "own-trace"})
            assert own.status_code == 200
            deadline = time.monotonic() + 20
            names, own_trace = set(), None
            while time.monotonic() < deadline and not (
                {"POST /v1/systemone", "execute", "queue"} <= names and own_trace
            ):
                time.sleep(0.2)
                names = set()
                for path, message in _Receiver.requests:
                    assert path == "/v1/traces"
                    for rs in message.resource_spans:
                        resource = {a.key: a.value.string_value for a in rs.resource.attributes}
                        assert resource["service.name"] == "omni under test"  # not the default
                        assert resource["deployment.environment"] == "test"
                        for ss in rs.scope_spans:
                            for span in ss.spans:
                                if span.trace_id.hex() == TRACE_ID:
                                    names.add(span.name)
                                if any(
                                    a.key == "omni.request_id" and a.value.string_value == "own-trace"
                                    for a in span.attributes
                                ):
                                    own_trace = span.trace_id.hex()
            assert {"POST /v1/systemone", "decode", "prepare", "queue", "finish", "execute"} <= names
            # The access lines name each request's trace: the caller's, and the one the server began.
            log = s.log()
            assert "POST /v1/systemone 200 " in log and "trace_id=%s" % TRACE_ID in log
            assert own_trace and own_trace != TRACE_ID
            assert re.search(
                r"omni\.access \[own-trace\]: POST /v1/systemone 200 .* trace_id=%s$" % own_trace, log, re.M
            )
    finally:
        receiver.shutdown()


def _request_spans(sampler, n: int, headers=None):
    import random

    from app.tracing import StagedIds, Tracing

    random.seed(5)
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler, id_generator=StagedIds())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing(provider)
    spans = [tracing.request_span("POST /v1/systemone", dict(headers or {})) for _ in range(n)]
    for span in spans:
        if span is not None:
            span.end()
    return tracing, spans, exporter


def test_a_ratio_sampler_is_decided_before_the_sdk_on_the_same_trace_id():
    """Requests with no traceparent under a ratio sampler: the ones not sampled never reach the
    SDK (request_span returns None), the sampled ones are recorded under the very trace id the
    decision was made on, and the share sampled is the ratio."""
    from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

    from app.tracing import RootedParentBased

    tracing, spans, exporter = _request_spans(RootedParentBased(TraceIdRatioBased(0.25)), 4000)
    kept = [s for s in spans if s is not None]
    assert 0.22 < len(kept) / len(spans) < 0.28
    assert tracing._ids.staged is None
    finished = exporter.get_finished_spans()
    assert len(finished) == len(kept) and all(s.kind == SpanKind.SERVER and s.parent is None for s in finished)
    bound = TraceIdRatioBased(0.25).bound
    assert all(s.context.trace_id & ((1 << 64) - 1) < bound for s in finished)
    assert len({s.context.trace_id for s in finished}) == len(finished)  # no staged id reused
    # Another root span afterwards draws its own id: nothing is left staged for it.
    other = tracing.tracer.start_span("other")
    assert other.get_span_context().trace_id not in {s.context.trace_id for s in finished}


def test_requests_never_sampled_never_reach_the_sdk(monkeypatch):
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, TraceIdRatioBased

    from app.tracing import RootedParentBased

    from app.tracing import StagedIds, Tracing

    for sampler in (RootedParentBased(TraceIdRatioBased(0.0)), ALWAYS_OFF, TraceIdRatioBased(0.0)):
        tracing = Tracing(TracerProvider(sampler=sampler, id_generator=StagedIds()))
        monkeypatch.setattr(tracing.tracer, "start_span", lambda *a, **k: pytest.fail("reached the SDK"))
        assert all(tracing.request_span("POST /v1/systemone", {}) is None for _ in range(50))


def test_an_incoming_traceparent_and_other_samplers_take_the_sdks_own_path():
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased

    from app.tracing import RootedParentBased

    # A caller's sampled traceparent is followed even at ratio 0; its unsampled one is honoured.
    _, spans, _ = _request_spans(RootedParentBased(TraceIdRatioBased(0.0)), 3, {"traceparent": TRACEPARENT})
    assert all(s is not None and "%032x" % s.get_span_context().trace_id == TRACE_ID for s in spans)
    unsampled = "00-%s-00f067aa0ba902b7-00" % ("1" * 32)
    _, spans, _ = _request_spans(RootedParentBased(TraceIdRatioBased(1.0)), 3, {"traceparent": unsampled})
    assert spans == [None, None, None]
    # A sampler that is not a trace-id ratio (always on, the SDK's default) is asked as before,
    # and so is the SDK's own ParentBased, whose root sampler is its own (private) business.
    for sampler in (ParentBased(ALWAYS_ON), RootedParentBased(ALWAYS_ON), ParentBased(TraceIdRatioBased(1.0))):
        tracing, spans, _ = _request_spans(sampler, 5)
        assert tracing._bound is None and all(s is not None for s in spans)


def test_the_providers_from_the_environment_stage_their_ids():
    from app.tracing import StagedIds, Tracing, provider_from_env

    env = {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5"}
    provider = provider_from_env(env, exporters=[InMemorySpanExporter()])
    try:
        assert isinstance(provider.id_generator, StagedIds)
        assert Tracing(provider)._bound == 1 << 63
    finally:
        provider.shutdown()


@pytest.mark.parametrize(
    "name, arg, description",
    [
        (None, None, "ParentBased{root:AlwaysOnSampler"),  # the SDK's default
        ("always_off", None, "AlwaysOffSampler"),
        ("traceidratio", "0.25", "TraceIdRatioBased{0.25}"),
        ("parentbased_traceidratio", "0.01", "ParentBased{root:TraceIdRatioBased{0.01}"),
        ("parentbased_traceidratio", "lots", "ParentBased{root:TraceIdRatioBased{1.0}"),  # as the SDK
        ("PARENTBASED_ALWAYS_OFF", None, "ParentBased{root:AlwaysOffSampler"),
        ("jaeger_remote", None, "ParentBased{root:AlwaysOnSampler"),  # unknown: the default
    ],
)
def test_the_sampler_is_the_one_the_standard_variables_name(name, arg, description):
    from app.tracing import sampler_from_env

    env = {k: v for k, v in (("OTEL_TRACES_SAMPLER", name), ("OTEL_TRACES_SAMPLER_ARG", arg)) if v is not None}
    assert sampler_from_env(env).get_description().startswith(description)


@pytest.mark.parametrize(
    "env, service",
    [
        ({}, "system1-omni"),
        ({"OTEL_RESOURCE_ATTRIBUTES": "team=decisions, service.name=from-attributes"}, "from-attributes"),
        ({"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attributes", "OTEL_SERVICE_NAME": "from-name"}, "from-name"),
        ({"OTEL_RESOURCE_ATTRIBUTES": "service.name=a%2Cb", "OTEL_SERVICE_NAME": " "}, "a,b"),
    ],
)
def test_the_service_name_follows_opentelemetrys_precedence(env, service):
    from app.tracing import provider_from_env

    provider = provider_from_env(env, exporters=[InMemorySpanExporter()])
    try:
        attributes = provider.resource.attributes
        assert attributes["service.name"] == service
        if "team=" in env.get("OTEL_RESOURCE_ATTRIBUTES", ""):
            assert attributes["team"] == "decisions"
    finally:
        provider.shutdown()
