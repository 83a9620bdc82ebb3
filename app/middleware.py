"""Outermost ASGI layer: request id, Server-Timing and request metrics on every response.

It wraps the whole Litestar app, so 404s and 405s raised by the router get the same headers.
"""
from __future__ import annotations

import itertools
import os
import re

from opentelemetry.trace import Status, StatusCode

from app.timing import Timing

_REQUEST_ID = re.compile(r"^[\x21-\x7e]{1,128}$")
UNTIMED = ("/livez", "/readyz", "/health", "/metrics")


def request_id(headers: list[tuple[bytes, bytes]]) -> str:
    for name, value in headers:
        if name == b"x-request-id":
            text = value.decode("latin-1")
            if _REQUEST_ID.match(text):
                return text
            break
    return _ids.next()


class _RequestIds:
    """32 hex digits, unique: a random prefix per process (drawn again after a fork) and a
    counter. uuid4 per request cost more than the rest of this layer."""

    def __init__(self) -> None:
        self.pid = -1

    def next(self) -> str:
        if self.pid != os.getpid():
            self.pid, self.prefix, self.count = os.getpid(), os.urandom(8).hex(), itertools.count()
        return "%s%016x" % (self.prefix, next(self.count))


_ids = _RequestIds()


class RequestContext:
    def __init__(self, app, metrics, tracing=None, direct: dict | None = None):
        self.app = app
        self.metrics = metrics
        self.tracing = tracing
        # Paths whose ASGI app is called straight from here instead of through the wrapped app
        # (routes/systemone.direct): still inside this layer, so with the same headers and metrics.
        self.direct = direct or {}

    def __getattr__(self, name):   # expose the wrapped Litestar app's attributes
        return getattr(self.app, name)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        rid = request_id(scope.get("headers", []))
        path = scope.get("path", "")
        span = None
        if self.tracing is not None and self.tracing.enabled and path.startswith("/v1/"):
            # None when not sampled: nothing of the request is exported, so it starts no stage
            # spans and gives its batch no link. At 10% sampling those cost the loop ~85 µs a
            # request (development machine: ~190 -> ~105 µs over tracing off), and one worker's
            # loop bounds the throughput.
            span = self.tracing.request_span("%s %s" % (scope.get("method", ""), path), scope.get("headers", []))
            if span is not None:
                span.set_attributes({"http.request.method": scope.get("method", ""), "url.path": path,
                                     "http.route": path, "omni.request_id": rid})
        timing = Timing(self.tracing, span) if span is not None else Timing()
        scope["omni.request_id"] = rid
        scope["omni.timing"] = timing

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", [])
                           if h[0].lower() not in (b"x-request-id", b"server-timing")]
                headers.append((b"x-request-id", rid.encode("latin-1")))
                headers.append((b"server-timing", timing.header().encode("latin-1")))
                message = {**message, "headers": headers}
                self._record(path, scope, message["status"], timing)
                if span is not None:
                    span.set_attribute("http.response.status_code", message["status"])
                    if message["status"] >= 500:
                        span.set_status(Status(StatusCode.ERROR, scope.get("omni.error", "")))
            await send(message)

        try:
            await self.direct.get(path, self.app)(scope, receive, send_with_headers)
        except BaseException as exc:
            if span is not None:
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            if span is not None:
                span.end()

    def _record(self, path: str, scope, status: int, timing: Timing) -> None:
        route = path if path in UNTIMED or path.startswith("/v1/") or path.startswith("/schema") else "other"
        self.metrics.observe_request(route, scope.get("omni.model", ""), status,
                                     timing.stages if path == "/v1/systemone" else None)
