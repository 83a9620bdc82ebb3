"""POST /v1/systemone: one request, typed answers from one forward pass."""
from __future__ import annotations

import msgspec
from litestar import Request, Response, post

from app.body import read_json
from app.routes.common import check_auth, omni, profile_of


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
    slot, response = await o.engine.decide(body, profile, timing)
    request.scope["omni.model"] = slot.name
    return Response(content=msgspec.json.encode(response), media_type="application/json")
