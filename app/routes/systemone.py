"""POST /v1/systemone: one request, typed answers from one forward pass.

The one route on the hot path is a raw ASGI handler. It is registered in the Litestar app (its
schema, and a route that answers like the rest), but the server's outermost layer calls it
directly (`direct`): with one worker the event loop's CPU per request bounds the server's
throughput, and Litestar's per-request machinery (signature parsing, Request and Response
objects, router and exception layers) is a large share of it. `direct` answers what those
layers would: a Problem as problem+json, anything else as a logged 500 `internal_error`.
"""

from __future__ import annotations

import functools
from typing import Any
from collections.abc import Awaitable, Callable, Coroutine, Mapping

import msgspec
from litestar import Litestar, asgi
from litestar.types import HTTPResponseBodyEvent, HTTPResponseStartEvent, Receive, Send

from app import middleware
from app.body import OFFLOAD_BYTES, read_json, read_raw
from app.problems import Problem
from app.routes.common import Omni, check_auth, problem_reply, profile_of, unexpected

_JSON = (b"content-type", b"application/json")


# The raw ASGI scope of an HTTP request, with what the request-context layer records in it
# ("omni.*" keys): a dict, not Litestar's TypedDict of the standard keys.
HttpScope = dict[str, Any]


def headers_of(scope: HttpScope) -> dict[str, str]:
    """Request headers by lower-case name, as the request-context layer read them."""
    headers = scope.get("omni.headers")
    return headers if headers is not None else middleware.headers_of(scope["headers"])


@asgi("/v1/systemone", copy_scope=False)  # the scope carries what the request-context layer records
async def systemone(scope: HttpScope, receive: Receive, send: Send) -> None:
    if scope["method"] != "POST":
        raise Problem(
            405, "method_not_allowed", "%s is not allowed on /v1/systemone" % scope["method"], headers={"Allow": "POST"}
        )
    o = scope["litestar_app"].state.omni
    headers = headers_of(scope)
    content = await answer(
        o, scope, headers, functools.partial(read_raw, receive, o.settings), functools.partial(_disconnected, receive)
    )
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": 200,
        "headers": [_JSON, (b"content-length", b"%d" % len(content))],
    }
    await send(start)
    await send(body_event(content))


async def answer(
    o: Omni,
    scope: HttpScope,
    headers: Mapping[str, str],
    read: Callable[[], Awaitable[bytes]],
    disconnected: Callable[[], Coroutine[Any, Any, object]],
) -> bytes:
    """The JSON answer to one POST, whichever interface Granian speaks: `read()` gives the raw
    body, `disconnected()` returns when the client has gone, and `scope` (the ASGI scope, or
    the RSGI face's dict) carries what the request-context layer records."""
    profile = scope["omni.profile"] = profile_of(headers, o.settings)
    timing = scope["omni.timing"]
    check_auth(headers, o.settings)
    o.engine.admit(unread=True)
    with timing.stage("decode"):
        body, size = await read_json(headers, read, o.settings)
    # A body past 64 KiB once decompressed is prepared off the event loop.
    slot, response = await o.engine.decide(
        body, profile, timing, offload=size > OFFLOAD_BYTES, disconnected=disconnected
    )
    scope["omni.model"] = slot.name
    return msgspec.json.encode(response)


def direct(litestar: Litestar) -> middleware.App:
    """The route as an ASGI app of its own, for the request-context layer to call instead of
    Litestar: the scope gets the app as Litestar's router would give it, and what the app's
    exception handlers would answer (app/main.py) is answered here."""
    handler = systemone.fn

    async def app(scope: HttpScope, receive: middleware.Receive, send: middleware.Send) -> None:
        scope["app"] = scope["litestar_app"] = litestar
        started = False

        async def tracked(message: middleware.Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await handler(scope, receive, tracked)
        except Problem as exc:
            if started:
                raise
            await _reply(litestar, scope, send, exc)
        except Exception as exc:
            if started:
                raise
            await _reply(litestar, scope, send, unexpected(scope["method"], scope["path"], exc))

    return app


def body_event(content: bytes) -> HTTPResponseBodyEvent:
    return {"type": "http.response.body", "body": content, "more_body": False}


async def _reply(litestar: Litestar, scope: HttpScope, send: Send, problem: Problem) -> None:
    body, media = problem_reply(litestar.state.omni, scope, problem, headers_of(scope))
    headers = [(b"content-type", media.encode("latin-1")), (b"content-length", b"%d" % len(body))]
    headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in problem.headers.items()]
    start: HTTPResponseStartEvent = {"type": "http.response.start", "status": problem.status, "headers": headers}
    await send(start)
    await send(body_event(body))


async def _disconnected(receive: Receive) -> None:
    """Returns when the client goes away (the body has been read, so only disconnect remains)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
