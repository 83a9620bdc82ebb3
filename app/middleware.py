"""Outermost ASGI layer: request id, Server-Timing and request metrics on every response.

It wraps the whole Litestar app, so 404s and 405s raised by the router get the same headers.
Under Granian's RSGI interface (app/rsgi.py) the hot route gets the same from `open` and
`answered`, and every other request comes through this layer, bridged.
"""
from __future__ import annotations

import itertools
import os
import re
from typing import Mapping

from opentelemetry.trace import Status, StatusCode

from app.problems import Problem
from app.timing import Timing

_REQUEST_ID = re.compile(r"^[\x21-\x7e]{1,128}$")
UNTIMED = ("/livez", "/readyz", "/health", "/metrics")
# Request headers larger than this in all (names and values) are refused with 431 (docs/api.md);
# Granian's own buffer refuses far larger ones before the app.
MAX_HEADER_BYTES = 64 * 1024


def oversized_headers(headers: Mapping[str, str]) -> Problem | None:
    """The 431 for headers over MAX_HEADER_BYTES in all, else None. `headers`: any mapping with
    `items()` (Granian's, or headers_of's)."""
    size = 0
    for name, value in headers.items():
        size += len(name) + len(value)
    if size <= MAX_HEADER_BYTES:
        return None
    return Problem(431, "headers_too_large", "request headers hold %d bytes; at most %d are accepted"
                   % (size, MAX_HEADER_BYTES), headers={"Connection": "close"})


def request_id(headers: Mapping[str, str]) -> str:
    """The client's `x-request-id` where it is printable ASCII of 1-128 bytes, else a new one."""
    text = headers.get("x-request-id")
    return text if text is not None and _REQUEST_ID.match(text) else _ids.next()


def headers_of(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """ASGI request headers by (lower-case, per ASGI) name; the first of repeated ones wins."""
    out: dict[str, str] = {}
    for name, value in reversed(raw):
        out[name.decode("latin-1")] = value.decode("latin-1")
    return out


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

    # Granian's RSGI interface (app/rsgi.py), where main.create_app has set `rsgi`.
    def __rsgi_init__(self, loop) -> None:
        self.rsgi.init(loop)

    def __rsgi_del__(self, loop) -> None:
        self.rsgi.exit(loop)

    @property
    def __rsgi__(self):            # the face itself, so a request costs no extra coroutine
        return self.rsgi

    def open(self, scope: dict, method: str, path: str, headers: Mapping[str, str]) -> Timing:
        """Start a request: its headers, id and Timing (and span, when traced) go into `scope`,
        the ASGI scope or the RSGI face's own dict (app/rsgi.py)."""
        span = None
        rid = request_id(headers)
        if self.tracing is not None and self.tracing.enabled and path.startswith("/v1/"):
            # None when not sampled: nothing of the request is exported, so it starts no stage
            # spans and gives its batch no link: one worker's loop bounds the throughput.
            span = self.tracing.request_span("%s %s" % (method, path), headers)
            if span is not None:
                span.set_attributes({"http.request.method": method, "url.path": path,
                                     "http.route": path, "omni.request_id": rid})
        timing = Timing(self.tracing, span) if span is not None else Timing()
        scope["omni.headers"] = headers
        scope["omni.request_id"] = rid
        scope["omni.timing"] = timing
        return timing

    def answered(self, scope: dict, path: str, status: int) -> tuple[str, str]:
        """(x-request-id, Server-Timing): the headers every response gets, as its status is
        sent; the request is counted and its span told the status."""
        timing = scope["omni.timing"]
        self._record(path, scope, status, timing)
        span = timing.span
        if span is not None:
            span.set_attribute("http.response.status_code", status)
            if status >= 500:
                span.set_status(Status(StatusCode.ERROR, scope.get("omni.error", "")))
        return scope["omni.request_id"], timing.header()

    @staticmethod
    def failed(scope: dict, exc: BaseException) -> None:
        span = scope["omni.timing"].span
        if span is not None:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))

    @staticmethod
    def closed(scope: dict) -> None:
        span = scope["omni.timing"].span
        if span is not None:
            span.end()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        headers = headers_of(scope.get("headers", []))
        self.open(scope, scope.get("method", ""), path, headers)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", [])
                           if h[0].lower() not in (b"x-request-id", b"server-timing")]
                rid, server_timing = self.answered(scope, path, message["status"])
                headers += [(b"x-request-id", rid.encode("latin-1")),
                            (b"server-timing", server_timing.encode("latin-1"))]
                message = {**message, "headers": headers}
            await send(message)

        try:
            problem = oversized_headers(headers)
            if problem is None:
                await self.direct.get(path, self.app)(scope, receive, send_with_headers)
            else:
                await self.refuse(scope, headers, problem, send_with_headers)
        except BaseException as exc:
            self.failed(scope, exc)
            raise
        finally:
            self.closed(scope)

    async def refuse(self, scope, headers: Mapping[str, str], problem: Problem, send) -> None:
        """Answer `problem` before the app sees the request."""
        from app.routes.common import problem_reply        # the routes import this module

        body, media = problem_reply(self.app.state.omni, scope, problem, headers)
        extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in problem.headers.items()]
        await send({"type": "http.response.start", "status": problem.status,
                    "headers": [(b"content-type", media.encode("latin-1")),
                                (b"content-length", b"%d" % len(body))] + extra})
        await send({"type": "http.response.body", "body": body})

    def _record(self, path: str, scope, status: int, timing: Timing) -> None:
        route = path if path in UNTIMED or path.startswith("/v1/") or path.startswith("/schema") else "other"
        self.metrics.observe_request(route, scope.get("omni.model", ""), status,
                                     timing.stages if path == "/v1/systemone" else None)
