"""The app through Granian's RSGI interface (app/rsgi.py).

Over a real Granian process, the HTTP contract runs through both interfaces (tests/conftest.py
`server`), and the hardening tests through RSGI, as served. Here the face runs in-process, driven
through Granian's RSGI calls by a stand-in for its protocol object, for what a real client cannot
easily provoke: an engine bug, a client gone while its body is read, a streamed answer, a lifespan
that fails.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.config import Settings
from app.main import create_app
from app.rsgi import Lifespan, _address, bridge
from granian.rsgi import ProtocolClosed
from tests.app.test_http import BODY

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


class Headers:
    """Granian's request headers as the app reads them: `get` (the first of repeated names) and `in`."""

    def __init__(self, pairs):
        self.pairs = [(k.lower(), v) for k, v in pairs]

    def get(self, key, default=None):
        return next((v for k, v in self.pairs if k == key.lower()), default)

    def __contains__(self, key):
        return any(k == key.lower() for k, _ in self.pairs)

    def items(self):
        return list(self.pairs)


class Scope:
    def __init__(self, method, path, headers=(), query=""):
        self.proto, self.http_version, self.scheme = "http", "1.1", "http"
        self.method, self.path, self.query_string = method, path, query
        self.client, self.server = "127.0.0.1:50000", "127.0.0.1:8000"
        self.headers = Headers(headers)


class Proto:
    """The request's protocol object: its body (whole, or in chunks), its disconnect, and what was
    answered (`response_bytes`, or a stream)."""

    def __init__(self, body=b"", chunks=None, closed=False):
        self.body, self.chunks, self.closed = body, chunks, closed
        self.gone = asyncio.Event()
        self.status = self.headers = self.content = None
        self.streamed: list[bytes] = []

    async def __call__(self):
        if self.closed:
            raise ProtocolClosed("gone")
        return self.body

    def __aiter__(self):
        async def chunks():
            for chunk in self.chunks:
                yield chunk

        return chunks()

    async def client_disconnect(self):
        await self.gone.wait()

    def response_bytes(self, status, headers, body):
        assert self.status is None, "answered twice"
        self.status, self.headers, self.content = status, dict(headers), body

    def response_stream(self, status, headers):
        self.status, self.headers = status, dict(headers)
        proto = self

        class Transport:
            async def send_bytes(self, data):
                proto.streamed.append(data)

        return Transport()

    def json(self):
        return json.loads(self.content)


def post(body, headers=None, **proto):
    content = json.dumps(body).encode() if body is not None else b""
    pairs = [("content-type", "application/json"), ("content-length", str(len(content)))]
    pairs += list((headers or {}).items())
    return Scope("POST", "/v1/systemone", pairs), Proto(content, **proto)


class Served:
    """The app's RSGI face on an event loop of its own, started and stopped by Granian's hooks."""

    def __init__(self, app):
        self.app, self.loop = app, asyncio.new_event_loop()
        self.app.__rsgi_init__(self.loop)
        for _ in range(600):
            if self.call(Scope("GET", "/readyz")).status == 200:
                return
            self.loop.run_until_complete(asyncio.sleep(0.05))
        raise AssertionError("never ready")

    def call(self, scope, proto=None):
        proto = proto or Proto()
        self.loop.run_until_complete(self.app.__rsgi__(scope, proto))
        return proto

    def close(self):
        self.app.__rsgi_del__(self.loop)
        self.loop.close()


@pytest.fixture
def served(english):
    s = Served(create_app(Settings(models=(english[1],), max_body_bytes=4096)))
    yield s
    s.close()


def test_the_hot_route_answers_as_the_pipeline_does(served, pipeline_english):
    scope, proto = post(BODY, {"x-request-id": "rsgi-1"})
    served.call(scope, proto)
    assert proto.status == 200 and proto.headers["content-type"] == "application/json"
    assert proto.json()["answers"] == pipeline_english(BODY)["answers"]
    assert proto.headers["x-request-id"] == "rsgi-1"
    stages = dict(p.split(";dur=") for p in proto.headers["server-timing"].split(", "))
    assert set(stages) >= {"decode", "prepare", "queue", "infer", "finish", "total"}
    metrics = served.call(Scope("GET", "/metrics"))
    assert b'omni_requests_total{model="english",route="/v1/systemone",status="200"} 1.0' in metrics.content


def test_a_chunked_body_is_read_chunk_by_chunk_within_the_limit(served, pipeline_english):
    content = json.dumps(BODY).encode()
    pairs = [("content-type", "application/json"), ("transfer-encoding", "chunked")]
    proto = served.call(Scope("POST", "/v1/systemone", pairs), Proto(chunks=[content[:10], content[10:]]))
    assert proto.status == 200 and proto.json()["answers"] == pipeline_english(BODY)["answers"]
    big = served.call(Scope("POST", "/v1/systemone", pairs), Proto(chunks=[b" " * 3000, b" " * 3000]))
    assert big.status == 413 and big.json()["code"] == "too_large" and big.headers["connection"] == "close"


def test_problems_keep_their_status_headers_and_request_id(served):
    scope, proto = post({"state": "x", "questions": {}}, {"prefer": "profile=jev"})
    served.call(scope, proto)
    assert proto.status == 422 and proto.headers["content-type"] == "application/json"  # the jev profile's shape
    assert proto.json()["detail"][0]["loc"][0] == "body"
    scope, proto = post(BODY, {"content-type": "text/plain"})
    scope.headers.pairs = [p for p in scope.headers.pairs if p != ("content-type", "application/json")]
    served.call(scope, proto)
    assert proto.status == 415 and proto.headers["content-type"] == "application/problem+json"
    assert proto.json()["instance"] == proto.headers["x-request-id"]
    # Not the hot path (GET, unknown path): through the bridge and Litestar, the same headers.
    wrong = served.call(Scope("GET", "/v1/systemone"))
    assert wrong.status == 405 and wrong.headers["allow"] == "POST" and wrong.headers["x-request-id"]
    missing = served.call(Scope("GET", "/nowhere", query="a=1"))
    assert missing.status == 404 and json.loads(missing.content)["code"] == "not_found"
    assert "total;dur=" in missing.headers["server-timing"]


def test_a_client_gone_while_its_body_is_read_is_a_499(served):
    scope, proto = post(BODY, closed=True)
    served.call(scope, proto)
    assert proto.status == 499 and proto.json()["code"] == "client_disconnected"


def test_an_unexpected_error_is_a_logged_500_problem(served, monkeypatch, caplog):
    async def broken(*args, **kwargs):
        raise RuntimeError("a bug in the engine")

    monkeypatch.setattr(served.app.state.omni.engine, "decide", broken)
    scope, proto = post(BODY, {"x-request-id": "bug-2"})
    with caplog.at_level(logging.ERROR, logger="omni"):
        served.call(scope, proto)
    assert proto.status == 500 and proto.headers["content-type"] == "application/problem+json"
    assert proto.json()["code"] == "internal_error" and "a bug" not in proto.content.decode()
    assert proto.headers["x-request-id"] == "bug-2" and "total;dur=" in proto.headers["server-timing"]
    assert any("unhandled error on POST /v1/systemone" in r.getMessage() and r.exc_info for r in caplog.records)


def test_the_request_span_continues_the_callers_trace(english):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    served = Served(create_app(Settings(models=(english[1],)), tracer_provider=provider))
    try:
        scope, proto = post(BODY, {"traceparent": "00-%s-00f067aa0ba902b7-01" % TRACE_ID, "x-request-id": "t-1"})
        served.call(scope, proto)
    finally:
        served.close()
    assert proto.status == 200
    root = next(s for s in exporter.get_finished_spans() if s.name == "POST /v1/systemone")
    assert root.context.trace_id == int(TRACE_ID, 16) and root.parent.span_id == 0x00F067AA0BA902B7
    assert root.attributes["omni.request_id"] == "t-1" and root.attributes["http.response.status_code"] == 200
    names = {s.name for s in exporter.get_finished_spans() if s.context.trace_id == int(TRACE_ID, 16)}
    assert {"decode", "prepare", "queue", "finish"} <= names


def test_the_bridge_streams_what_an_asgi_app_streams_and_answers_a_bodiless_start():
    seen = {}

    async def app(scope, receive, send):
        seen.update(scope=scope, message=await receive())
        await send({"type": "http.response.start", "status": 200, "headers": [(b"x-a", b"1")]})
        if scope["path"] == "/stream":
            for part in (b"one ", b"two", b""):
                await send({"type": "http.response.body", "body": part, "more_body": part != b""})

    loop = asyncio.new_event_loop()
    try:
        proto, state = Proto(b"hello"), {"pool": "p"}
        loop.run_until_complete(bridge(app, Scope("POST", "/stream", [("X-Up", "y")], "q=1"), proto, state))
        assert proto.status == 200 and proto.headers == {"x-a": "1"} and proto.streamed == [b"one ", b"two"]
        assert seen["message"] == {"type": "http.request", "body": b"hello", "more_body": False}
        scope = seen["scope"]
        assert scope["query_string"] == b"q=1" and (b"x-up", b"y") in scope["headers"]
        assert scope["client"] == ("127.0.0.1", 50000) and scope["method"] == "POST"
        assert scope["state"] == state and scope["state"] is not state  # a copy, as ASGI servers give
        empty = Proto()
        loop.run_until_complete(bridge(app, Scope("HEAD", "/"), empty))
        assert empty.status == 200 and empty.content == b""
    finally:
        loop.close()


def test_addresses_and_a_failed_lifespan():
    assert _address("[::1]:8000") == ("::1", 8000) and _address("10.0.0.2:5") == ("10.0.0.2", 5)
    assert _address(None) is None

    async def failing(scope, receive, send):
        assert (await receive())["type"] == "lifespan.startup"
        await send({"type": "lifespan.startup.failed", "message": "no models"})

    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(RuntimeError, match="startup failed: no models"):
            loop.run_until_complete(Lifespan(failing).startup())
    finally:
        loop.close()


def test_a_bridged_request_that_fails_before_its_answer_is_a_problem(served, caplog):
    """Text Granian never gives (a lone surrogate) stands for any failure before the ASGI app
    answers: a 500 problem with a request id and Server-Timing, not Granian's bare 500."""
    with caplog.at_level(logging.ERROR, logger="omni"):
        proto = served.call(Scope("GET", "/livez", [("x-request-id", "odd-1")], query="q=\ud800"))
    assert proto.status == 500 and proto.json()["code"] == "internal_error"
    assert proto.json()["title"] == "Internal server error" and proto.json()["instance"] == "odd-1"
    assert proto.headers["x-request-id"] == "odd-1" and "total;dur=" in proto.headers["server-timing"]
    ok = served.call(Scope("GET", "/livez", query="q=\u20ac\U0001f600"))  # raw UTF-8, as Granian gives it
    assert ok.status == 200 and ok.headers["x-request-id"]
