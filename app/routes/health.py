"""Liveness (no model failed), readiness (after a real warm-up request), the served models'
identity (/health), Prometheus metrics."""
from __future__ import annotations

import msgspec
from litestar import Request, Response, get

from app.problems import PROBLEM_MEDIA_TYPE
from app.routes.common import omni
from app.runtime.registry import SlotState


def _problem(request: Request, code: str, detail: str, **extra) -> dict:
    return {"type": "https://system1-omni.dev/problems/" + code.replace("_", "-"), "title": "Service unavailable",
            "status": 503, "code": code, "detail": detail, "instance": request.scope.get("omni.request_id", ""),
            **extra}


@get("/livez", summary="The process can serve: no model has failed", tags=["health"])
async def livez(request: Request) -> Response:
    """200 while loading and serving; 503 once a model is `failed` (its session could not be
    created, its warm-up failed, or too many forward passes failed in a row). The server does not
    rebuild a failed model itself, so only a restart brings it back."""
    failed = [s for s in omni(request).registry.slots if s.state is SlotState.FAILED]
    if not failed:
        return Response(content=b'{"status":"ok"}', media_type="application/json")
    detail = "; ".join("model %s failed: %s" % (s.name, s.error) for s in failed)
    body = _problem(request, "model_failed", detail + "; restart the server",
                    models=[{"name": s.name, "state": s.state.value, "error": s.error} for s in failed])
    return Response(content=msgspec.json.encode(body), status_code=503, media_type=PROBLEM_MEDIA_TYPE,
                    headers={"Retry-After": str(max(1, omni(request).settings.retry_after_s))})


def _model_status(slot) -> dict:
    out = {"name": slot.name, "state": slot.state.value, **slot.served_by(),
           "load_ms": slot.load_ms, "warmup_ms": slot.warmup_ms, "cuda_graphs": slot.cuda_graphs(),
           "limits": slot.model.limits()}
    if slot.graphs_refused:
        out["cuda_graphs_refused"] = slot.graphs_refused
    if slot.error:
        out["error"] = slot.error
    return out


def _compile(slots) -> dict:
    """`enabled`: every model on a GPU replays captured CUDA graphs (false with none on a GPU).
    Each model's own `compiled` is exact where they differ."""
    on_gpu = [s for s in slots if s.device and not s.device.startswith("cpu")]
    return {"enabled": bool(on_gpu) and all(s.static_shapes for s in on_gpu)}


def _readiness(request: Request, path: str) -> Response:
    o = omni(request)
    slots = o.registry.slots
    statuses = [_model_status(s) for s in slots]
    s = o.settings
    limits = {"max_body_bytes": s.max_body_bytes, "request_timeout_s": s.request_timeout_s,
              "queue_size": s.queue_size}
    # /readyz lists the models; /health keys them by name and adds `compile`, the shape that
    # served-Laya clients read a checkpoint's identity from.
    models = statuses if path == "/readyz" else {m["name"]: m for m in statuses}
    extra = {} if path == "/readyz" else {"compile": _compile(slots)}
    if o.registry.ready:
        body = {"status": "ready", "models": models, **extra, "limits": limits}
        return Response(content=msgspec.json.encode(body), media_type="application/json")
    detail = "no models are configured (set OMNI_MODELS)" if not statuses else "not every model is warm: " + ", ".join(
        "%s is %s" % (m["name"], m["state"]) for m in statuses if m["state"] != "ready")
    body = _problem(request, "not_ready", detail, models=models, **extra, limits=limits)
    return Response(content=msgspec.json.encode(body), status_code=503, media_type=PROBLEM_MEDIA_TYPE,
                    headers={"Retry-After": str(max(1, s.retry_after_s))})


@get("/readyz", summary="Every model loaded and warmed up", tags=["health"])
async def readyz(request: Request) -> Response:
    return _readiness(request, "/readyz")


@get("/health", summary="Readiness, with the models keyed by name", tags=["health"])
async def health(request: Request) -> Response:
    return _readiness(request, "/health")


@get("/metrics", summary="Prometheus metrics", tags=["health"], media_type="text/plain")
async def metrics(request: Request) -> Response:
    o = omni(request)
    o.metrics.queue_depth.set(o.engine.executor.depth())
    return Response(content=o.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")
