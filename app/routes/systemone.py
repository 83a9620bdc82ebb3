"""POST /v1/systemone: one request, typed answers from one forward pass."""
from __future__ import annotations

import functools

import msgspec
from litestar import Request, Response, post

from app.body import read_json
from app.problems import Problem
from app.routes.common import check_auth, omni, profile_of

OFFLOAD_BYTES = 64 * 1024


@post("/v1/systemone", status_code=200, summary="Answer typed questions about a state",
      operation_id="systemone", tags=["decisions"])
async def systemone(request: Request) -> Response:
    o = omni(request)
    profile = profile_of(request, o.settings)
    request.scope["omni.profile"] = profile
    timing = request.scope["omni.timing"]
    check_auth(request, o.settings)
    with timing.stage("decode"):
        body = await read_json(request, o.settings)
    # Bodies past 64 KiB (or of unknown length) are prepared off the event loop.
    length = request.headers.get("content-length")
    offload = length is None or not length.isdigit() or int(length) > OFFLOAD_BYTES
    slot, response = await o.engine.decide(body, profile, timing, offload=offload,
                                           disconnected=functools.partial(_disconnected, request))
    request.scope["omni.model"] = slot.name
    return Response(content=msgspec.json.encode(response), media_type="application/json")


async def _disconnected(request: Request) -> None:
    """Returns when the client goes away (the body has been read, so only disconnect remains)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
