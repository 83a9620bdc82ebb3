"""Outermost ASGI layer: request id, Server-Timing, request metrics and the access line of
every request.

It wraps the whole Litestar app, so 404s and 405s raised by the router get the same headers.
Under Granian's RSGI interface (app/rsgi.py) the hot route gets the same from `open`,
`answered` and `closed`, and every other request comes through this layer, bridged.

Metrics and spans name a request by its route template (the router's, or a path the app
serves); any other path is `unmatched`, so no client can add series or span names.
"""

from __future__ import annotations

import itertools
import os
import re
from typing import TYPE_CHECKING, Any, cast
from collections.abc import Awaitable, Callable, Mapping, Sequence

from opentelemetry.trace import Status, StatusCode

from app import logs
from app.problems import Problem
from app.timing import Timing

if TYPE_CHECKING:
    import asyncio

    from litestar import Litestar
    from opentelemetry.trace import Span

    from app.metrics import Metrics
    from app.rsgi import RSGIFace
    from app.tracing import Tracing

# ASGI as this layer handles it: the scope a plain dict (the layer records "omni.*" keys in it;
# Litestar's TypedDicts name only the standard ones) and messages read as mappings.
Scope = dict[str, Any]
Message = Mapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

_REQUEST_ID = re.compile(r"^[\x21-\x7e]{1,128}$")
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")
UNMATCHED = "unmatched"
DECISIONS = "/v1/systemone"
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
    return Problem(
        431,
        "headers_too_large",
        "request headers hold %d bytes; at most %d are accepted" % (size, MAX_HEADER_BYTES),
        headers={"Connection": "close"},
    )


def request_id(headers: Mapping[str, str]) -> str:
    """The client's `x-request-id` where it is printable ASCII of 1-128 bytes, else a new one."""
    text = headers.get("x-request-id")
    return text if text is not None and _REQUEST_ID.match(text) else _ids.next()


def headers_of(raw: Sequence[tuple[bytes, bytes]]) -> dict[str, str]:
    """ASGI request headers by (lower-case, per ASGI) name; the first of repeated ones wins."""
    out: dict[str, str] = {}
    for name, value in reversed(raw):
        out[name.decode("latin-1")] = value.decode("latin-1")
    return out


class _RequestIds:
    """32 hex digits, unique: a random prefix per process (drawn again after a fork) and a
    counter, cheaper per request than drawing a uuid4."""

    def __init__(self) -> None:
        self.pid = -1

    def next(self) -> str:
        if self.pid != os.getpid():
            self.pid, self.prefix, self.count = os.getpid(), os.urandom(8).hex(), itertools.count()
        return "%s%016x" % (self.prefix, next(self.count))


_ids = _RequestIds()


class RequestContext:
    rsgi: RSGIFace  # Granian's RSGI interface (app/rsgi.py), set by main.create_app

    def __init__(
        self, app: Litestar, metrics: Metrics, tracing: Tracing | None = None, direct: dict[str, App] | None = None
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.tracing = tracing
        # Paths whose ASGI app is called straight from here instead of through the wrapped app
        # (routes/systemone.direct): still inside this layer, so with the same headers and metrics.
        self.direct = direct or {}
        # Paths the app serves as they are (no path parameters): their own route template.
        self.routes = frozenset([r.path for r in getattr(app, "routes", ()) if "{" not in r.path] + list(self.direct))

    def __getattr__(self, name: str) -> Any:  # expose the wrapped Litestar app's attributes
        return getattr(self.app, name)

    # Granian's RSGI interface (app/rsgi.py), where main.create_app has set `rsgi`.
    def __rsgi_init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.rsgi.init(loop)

    def __rsgi_del__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.rsgi.exit(loop)

    @property
    def __rsgi__(self) -> RSGIFace:  # the face itself, so a request costs no extra coroutine
        return self.rsgi

    def open(self, scope: Scope, method: str, path: str, headers: Mapping[str, str]) -> Timing:
        """Start a request: its headers, id and Timing (and span, when traced) go into `scope`,
        the ASGI scope or the RSGI face's own dict (app/rsgi.py)."""
        span = None
        rid = request_id(headers)
        if self.tracing is not None and self.tracing.enabled and path.startswith("/v1/"):
            # None when not sampled: nothing of the request is exported, so it starts no stage
            # spans and gives its batch no link: one worker's loop bounds the throughput.
            known = path in self.routes
            span = self.tracing.request_span("%s %s" % (method, path) if known else method, headers)
            if span is not None:
                span.set_attributes({"http.request.method": method, "url.path": path, "omni.request_id": rid})
                if known:
                    span.set_attribute("http.route", path)
        timing = Timing(self.tracing, span) if span is not None else Timing()
        scope["omni.headers"] = headers
        scope["omni.request_id"] = rid
        scope["omni.timing"] = timing
        scope["omni.log"] = logs.current_request.set(rid)
        return timing

    def route(self, scope: Scope, path: str) -> str:
        """The request's route template: the router's where it matched one, the path where the
        app serves it as it is, else `unmatched`."""
        template: str | None = scope.get("path_template")
        if template:
            return template
        return path if path in self.routes else UNMATCHED

    def answered(self, scope: Scope, path: str, status: int) -> tuple[str, str]:
        """(x-request-id, Server-Timing): the headers every response gets, as its status is
        sent; the request is counted and its span told the status."""
        timing = scope["omni.timing"]
        total = timing.elapsed()
        route = scope["omni.route"] = self.route(scope, path)
        scope["omni.status"], scope["omni.total"] = status, total
        self.metrics.observe_request(
            route,
            timing.model,
            status,
            timing.stages if route == DECISIONS else None,
            total if route == DECISIONS else None,
        )
        span = timing.span
        if span is not None:
            span.set_attribute("http.response.status_code", status)
            if status >= 500:
                span.set_status(Status(StatusCode.ERROR, scope.get("omni.error", "")))
        return scope["omni.request_id"], timing.header(total)

    @staticmethod
    def failed(scope: Scope, exc: BaseException) -> None:
        span = scope["omni.timing"].span
        if span is not None:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))

    def closed(self, scope: Scope, method: str, path: str) -> None:
        """The request is over: its access line is written and its span ended. One that never
        answered (the app raised before its status) is logged as the 500 the server answers."""
        timing = scope["omni.timing"]
        try:
            span = timing.span
            route = scope.get("omni.route") or self.route(scope, path)
            logs.access(
                method,
                route,
                timing.model,
                scope.get("omni.status", 500),
                scope.get("omni.total") or timing.elapsed(),
                _trace_id(span, scope["omni.headers"]),
            )
            if span is not None:
                span.end()
        finally:
            logs.current_request.reset(scope["omni.log"])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await cast(App, self.app)(scope, receive, send)
        path, method = scope.get("path", ""), scope.get("method", "")
        headers = headers_of(scope.get("headers", []))
        self.open(scope, method, path, headers)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    h for h in message.get("headers", []) if h[0].lower() not in (b"x-request-id", b"server-timing")
                ]
                rid, server_timing = self.answered(scope, path, message["status"])
                headers += [
                    (b"x-request-id", rid.encode("latin-1")),
                    (b"server-timing", server_timing.encode("latin-1")),
                ]
                message = {**message, "headers": headers}
            await send(message)

        try:
            problem = oversized_headers(headers)
            if problem is None:
                await self.direct.get(path, cast(App, self.app))(scope, receive, send_with_headers)
            else:
                await self.refuse(scope, headers, problem, send_with_headers)
        except BaseException as exc:
            self.failed(scope, exc)
            raise
        finally:
            self.closed(scope, method, path)

    async def refuse(self, scope: Scope, headers: Mapping[str, str], problem: Problem, send: Send) -> None:
        """Answer `problem` before the app sees the request."""
        from app.routes.common import problem_reply  # the routes import this module

        body, media = problem_reply(self.app.state.omni, scope, problem, headers)
        extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in problem.headers.items()]
        await send(
            {
                "type": "http.response.start",
                "status": problem.status,
                "headers": [(b"content-type", media.encode("latin-1")), (b"content-length", b"%d" % len(body))] + extra,
            }
        )
        await send({"type": "http.response.body", "body": body})


def _trace_id(span: Span | None, headers: Mapping[str, str]) -> str:
    """The request's trace id: its span's, else the caller's `traceparent`'s (an unsampled
    request keeps no span), else empty."""
    if span is not None:
        return "%032x" % span.get_span_context().trace_id
    parent = headers.get("traceparent")
    match = _TRACEPARENT.match(parent) if parent else None
    return match.group(1) if match else ""
