"""Liveness, readiness (after a real warm-up request), Prometheus metrics."""
from __future__ import annotations

import msgspec
from litestar import Request, Response, get

from app.routes.common import omni


@get("/livez", summary="The process accepts connections", tags=["health"])
async def livez() -> dict:
    return {"status": "ok"}


def _model_status(slot) -> dict:
    out = {"name": slot.name, "state": slot.state.value, **slot.served_by(),
           "load_ms": slot.load_ms, "warmup_ms": slot.warmup_ms, "cuda_graphs": slot.cuda_graphs(),
           "limits": slot.model.limits()}
    if slot.graphs_refused:
        out["cuda_graphs_refused"] = slot.graphs_refused
    if slot.error:
        out["error"] = slot.error
    return out


@get(["/readyz", "/health"], summary="Every model loaded and warmed up", tags=["health"])
async def readyz(request: Request) -> Response:
    o = omni(request)
    models = [_model_status(s) for s in o.registry.slots]
    s = o.settings
    limits = {"max_body_bytes": s.max_body_bytes, "request_timeout_s": s.request_timeout_s,
              "queue_size": s.queue_size}
    if o.registry.ready:
        body = {"status": "ready", "models": models, "limits": limits}
        return Response(content=msgspec.json.encode(body), media_type="application/json")
    detail = "no models are configured (set OMNI_MODELS)" if not models else "not every model is warm: " + ", ".join(
        "%s is %s" % (m["name"], m["state"]) for m in models if m["state"] != "ready")
    body = {"type": "https://system1-omni.dev/problems/not-ready", "title": "Service unavailable",
            "status": 503, "code": "not_ready", "detail": detail,
            "instance": request.scope.get("omni.request_id", ""), "models": models, "limits": limits}
    return Response(content=msgspec.json.encode(body), status_code=503,
                    media_type="application/problem+json",
                    headers={"Retry-After": str(s.retry_after_s)})


@get("/metrics", summary="Prometheus metrics", tags=["health"], media_type="text/plain")
async def metrics(request: Request) -> Response:
    o = omni(request)
    o.metrics.queue_depth.set(o.engine.executor.depth())
    return Response(content=o.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")
