"""The app through Granian's RSGI interface (`granian --interface rsgi`), the way it is served.

One worker's event loop bounds the throughput, and under ASGI every request costs that loop a
scope dict, message dicts for the body and two `send` awaits for the answer. Under RSGI Granian
hands the loop a native scope, gives the body in one await and takes the answer in one call.

- The hot route (`POST /v1/systemone`, `routes/systemone.answer`) is answered natively here,
  with what the request-context layer gives every request (request id, Server-Timing, metrics,
  the span).
- Every other request goes through the very ASGI stack the ASGI interface serves (the
  request-context layer and Litestar), bridged here: an ASGI scope built from Granian's, the
  body as one `http.request` message, the answer as one response (or a stream, where the app
  streams).
- Litestar's startup and shutdown (the engine) run as the ASGI lifespan protocol, driven from
  Granian's RSGI init and exit hooks.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any, cast
from collections.abc import Awaitable, Callable, Coroutine, Mapping

from granian.rsgi import HTTPProtocol
from granian.rsgi import Scope as RSGIScope

from app.body import RSGI_CLOSED, read_rsgi
from app.middleware import App, Message, RequestContext, Scope, oversized_headers
from app.problems import Problem
from app.routes.common import Omni, problem_reply, unexpected

if TYPE_CHECKING:
    from granian._granian import RSGIHTTPStreamTransport

_ASGI = {"version": "3.0", "spec_version": "2.3"}
_JSON = ("content-type", "application/json")

# An answer for a hot path (routes/systemone.answer): (the app's objects, its scope dict, request
# headers, the body reader, a coroutine function that returns when the client has gone) -> the
# JSON body of a 200.
Hot = Callable[
    [Omni, Scope, Mapping[str, str], Callable[[], Awaitable[bytes]], Callable[[], Coroutine[Any, Any, object]]],
    Awaitable[bytes],
]


class RSGIFace:
    """What Granian calls under `--interface rsgi`: `context` is the request-context layer
    (app/middleware.py) around Litestar, `hot` the paths answered natively (POST only)."""

    def __init__(self, context: RequestContext, omni: Omni, hot: dict[str, Hot]) -> None:
        self.context, self.omni, self.hot = context, omni, hot
        self.lifespan = Lifespan(cast(App, context.app))

    def init(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.run_until_complete(self.lifespan.startup())

    def exit(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.run_until_complete(self.lifespan.shutdown())

    async def __call__(self, rscope: RSGIScope, proto: HTTPProtocol) -> None:
        """`proto`: a websocket's protocol object where `rscope.proto` says so, never used."""
        if rscope.proto != "http":
            return  # no websocket routes: Granian closes it
        hot = self.hot.get(rscope.path) if rscope.method == "POST" else None
        problem = oversized_headers(cast(Mapping[str, str], rscope.headers))
        if problem is not None:
            self.refuse(rscope, proto, problem)
        elif hot is None:
            try:
                await bridge(self.context, rscope, proto, self.lifespan.state)
            except Unanswered as exc:
                self.refuse(rscope, proto, unexpected(rscope.method, rscope.path, exc.__cause__ or exc))
        else:
            await self.answer(hot, rscope, proto)

    def refuse(self, rscope: RSGIScope, proto: HTTPProtocol, problem: Problem) -> None:
        """Answer `problem` where no ASGI layer did: with a request id and Server-Timing, counted,
        as every other answer is (Granian's own bare 500 has none of them)."""
        context, path, headers = self.context, rscope.path, cast(Mapping[str, str], rscope.headers)
        scope: Scope = {"method": rscope.method, "path": path}
        context.open(scope, rscope.method, path, headers)
        try:
            status, content, extra = self._problem(scope, headers, problem)
            rid, server_timing = context.answered(scope, path, status)
            proto.response_bytes(status, extra + [("x-request-id", rid), ("server-timing", server_timing)], content)
        except RSGI_CLOSED:
            pass
        finally:
            context.closed(scope, rscope.method, path)

    async def answer(self, hot: Hot, rscope: RSGIScope, proto: HTTPProtocol) -> None:
        context, path = self.context, rscope.path
        # Granian's own headers serve as the mapping every reader wants (`get`, `in`): names
        # match in any case and the first of repeated ones wins, as under ASGI (headers_of).
        headers = cast(Mapping[str, str], rscope.headers)
        scope: Scope = {"method": "POST", "path": path}
        context.open(scope, "POST", path, headers)
        read = functools.partial(read_rsgi, proto, headers, self.omni.settings)

        async def gone() -> None:  # a coroutine, for the disconnect watch's task
            await proto.client_disconnect()

        try:
            try:
                status, content, extra = 200, await hot(self.omni, scope, headers, read, gone), [_JSON]
            except Problem as exc:
                status, content, extra = self._problem(scope, headers, exc)
            except Exception as exc:
                status, content, extra = self._problem(scope, headers, unexpected("POST", path, exc))
            rid, server_timing = context.answered(scope, path, status)
            extra += [("x-request-id", rid), ("server-timing", server_timing)]
            # Not contextlib.suppress: that is an object made a request on the hot path.
            try:  # noqa: SIM105
                proto.response_bytes(status, extra, content)
            except RSGI_CLOSED:
                pass  # the client has gone (a 499 is counted): no one to answer
        except BaseException as exc:
            context.failed(scope, exc)
            raise
        finally:
            context.closed(scope, "POST", path)

    def _problem(
        self, scope: Scope, headers: Mapping[str, str], problem: Problem
    ) -> tuple[int, bytes, list[tuple[str, str]]]:
        body, media = problem_reply(self.omni, scope, problem, headers)
        return problem.status, body, [("content-type", media)] + [(k.lower(), v) for k, v in problem.headers.items()]


async def bridge(app: App, rscope: RSGIScope, proto: HTTPProtocol, state: dict[str, Any] | None = None) -> None:
    """One request through an ASGI app: its scope built from Granian's (with a copy of the
    lifespan's `state`, as ASGI servers give it), the body given as one message, the answer sent
    as one response, or streamed where the app streams it. Granian decodes the request line as
    UTF-8 (refusing what is not), so encoding its text as UTF-8 gives back the bytes as sent,
    whatever they hold. Raises `Unanswered` where the request failed before an answer began."""
    try:
        scope: Scope = {
            "type": "http",
            "asgi": _ASGI,
            "http_version": rscope.http_version,
            "method": rscope.method,
            "scheme": rscope.scheme,
            "path": rscope.path,
            "raw_path": rscope.path.encode("utf-8"),
            "query_string": rscope.query_string.encode("utf-8"),
            "root_path": "",
            "headers": [(k.encode("utf-8"), v.encode("utf-8")) for k, v in rscope.headers.items()],
            "client": _address(rscope.client),
            "server": _address(rscope.server),
            "state": dict(state or {}),
        }
    except Exception as exc:
        raise Unanswered() from exc
    body_given = False

    async def receive() -> Message:
        nonlocal body_given
        if not body_given:
            body_given = True
            try:
                return {"type": "http.request", "body": await proto(), "more_body": False}
            except RSGI_CLOSED:
                return {"type": "http.disconnect"}
        await proto.client_disconnect()
        return {"type": "http.disconnect"}

    start: dict[str, Any] = {}
    stream: RSGIHTTPStreamTransport | None = None
    sent = False

    async def send(message: Message) -> None:
        nonlocal stream, sent
        kind = message["type"]
        if kind == "http.response.start":
            start.update(
                status=message["status"],
                headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", [])],
            )
            return
        if kind != "http.response.body":
            return
        body, more = message.get("body", b""), message.get("more_body", False)
        if stream is None and not more:
            sent = True
            proto.response_bytes(start["status"], start["headers"], body)
            return
        if stream is None:
            sent = True
            stream = proto.response_stream(start["status"], start["headers"])
        if body:
            await stream.send_bytes(body)

    try:
        await app(scope, receive, send)
    except Exception as exc:
        if start or sent:
            raise
        raise Unanswered() from exc
    if start and not sent:  # a start with no body message (HEAD, or an empty answer)
        proto.response_bytes(start["status"], start["headers"], b"")


class Unanswered(Exception):
    """A bridged request failed before its answer began: the face answers it (`__cause__`)."""


def _address(text: str | None) -> tuple[str, int] | None:
    """("host", port) from Granian's "host:port" (IPv6 hosts keep their colons)."""
    if not text:
        return None
    host, _, port = text.rpartition(":")
    return (host.strip("[]"), int(port)) if port.isdigit() else (text, 0)


class Lifespan:
    """The ASGI lifespan protocol, driven by hand: Litestar's on_startup and on_shutdown."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.state: dict[str, Any] = {}  # what the app keeps in the lifespan scope's state
        self.task: asyncio.Task[None] | None = None
        # Made anew by each startup, on the loop that runs it.
        self.inbox: asyncio.Queue[Message] = asyncio.Queue()
        self.replies: asyncio.Queue[Message] = asyncio.Queue()

    async def _run(self) -> None:
        scope = {"type": "lifespan", "asgi": _ASGI, "state": self.state}
        try:
            await self.app(scope, self.inbox.get, self.replies.put)
        finally:
            await self.replies.put({"type": "lifespan.ended"})

    async def _step(self, what: str) -> None:
        await self.inbox.put({"type": "lifespan.%s" % what})
        reply = await self.replies.get()
        if reply["type"] != "lifespan.%s.complete" % what:
            raise RuntimeError("ASGI lifespan %s failed: %s" % (what, reply.get("message", reply["type"])))

    async def startup(self) -> None:
        self.inbox, self.replies = asyncio.Queue(), asyncio.Queue()
        self.task = asyncio.get_running_loop().create_task(self._run(), name="omni-lifespan")
        await self._step("startup")

    async def shutdown(self) -> None:
        if self.task is None or self.task.done():
            return
        await self._step("shutdown")
        await self.task
