"""POST /v1/systemone: one request, typed answers from one forward pass.

The one route on the hot path is a raw ASGI handler inside the Litestar app: Litestar still
routes it, and its exception handlers still turn every Problem raised here into problem+json,
but the per-request handler machinery (signature parsing, the Request and Response objects,
the response pipeline) is skipped. With one worker the event loop's CPU per request bounds the
server's throughput, and that machinery was about an eighth of it (docs/benchmarks.md).
"""
from __future__ import annotations

import functools

import msgspec
from litestar import asgi
from litestar.types import Receive, Scope, Send

from app.body import read_json
from app.problems import Problem
from app.routes.common import check_auth, profile_of

OFFLOAD_BYTES = 64 * 1024
_JSON = (b"content-type", b"application/json")


def headers_of(scope: Scope) -> dict[str, str]:
    """Request headers by (lower-case, per ASGI) name; the first of repeated ones wins."""
    out: dict[str, str] = {}
    for name, value in reversed(scope["headers"]):
        out[name.decode("latin-1")] = value.decode("latin-1")
    return out


@asgi("/v1/systemone", copy_scope=False)   # the scope carries what the request-context layer records
async def systemone(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["method"] != "POST":
        raise Problem(405, "method_not_allowed", "%s is not allowed on /v1/systemone" % scope["method"],
                      headers={"Allow": "POST"})
    o = scope["litestar_app"].state.omni
    headers = headers_of(scope)
    profile = scope["omni.profile"] = profile_of(headers, o.settings)
    timing = scope["omni.timing"]
    check_auth(headers, o.settings)
    with timing.stage("decode"):
        body = await read_json(headers, receive, o.settings)
    # Bodies past 64 KiB (or of unknown length) are prepared off the event loop.
    length = headers.get("content-length")
    offload = length is None or not length.isdigit() or int(length) > OFFLOAD_BYTES
    slot, response = await o.engine.decide(body, profile, timing, offload=offload,
                                           disconnected=functools.partial(_disconnected, receive))
    scope["omni.model"] = slot.name
    content = msgspec.json.encode(response)
    await send({"type": "http.response.start", "status": 200,
                "headers": [_JSON, (b"content-length", b"%d" % len(content))]})
    await send({"type": "http.response.body", "body": content})


async def _disconnected(receive: Receive) -> None:
    """Returns when the client goes away (the body has been read, so only disconnect remains)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
