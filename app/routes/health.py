"""Liveness (the process can serve), readiness (every model warm after a real warm-up request, or
one model with `?model=`), the served models' identity (/health), Prometheus metrics.

A model out of service is rebuilt by the server itself (app/runtime/recovery.py), so it makes
the replica not ready (strict readiness: a balancer sends its traffic to replicas that serve
every model) but not dead: a restart would take the other models down with it. `/livez` fails
only for what a new process mends: the executor thread gone, a pass hung past its bound
(app/runtime/watchdog.py), or a model that its rebuilds did not bring back."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import msgspec
from litestar import Request, Response, get

from app.problems import PROBLEM_MEDIA_TYPE, Problem
from app.routes.common import omni
from app.runtime.registry import ModelSlot, SlotState
from models.errors import RequestError


def _problem(request: Request[Any, Any, Any], code: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "https://system1-omni.dev/problems/" + code.replace("_", "-"),
        "title": "Service unavailable",
        "status": 503,
        "code": code,
        "detail": detail,
        "instance": request.scope.get("omni.request_id", ""),
        **extra,
    }


@get("/livez", summary="The process can serve", tags=["health"])
async def livez(request: Request[Any, Any, Any]) -> Response[Any]:
    """200 while loading and serving, a model being rebuilt included; 503 when the executor thread
    has stopped, a forward pass hangs past its bound, or a model is still out of service after
    its rebuilds: an orchestrator should restart the process."""
    o = omni(request)
    problems = o.engine.executor.liveness()
    if not problems:
        return Response(content=b'{"status":"ok"}', media_type="application/json")
    failed = [s for s in o.registry.slots if s.state is SlotState.FAILED]
    body = _problem(
        request,
        "not_live",
        "; ".join(problems) + "; restart the server",
        models=[
            {"name": s.name, "state": s.state.value, "error": s.error, "rebuilds": s.recovery.attempts} for s in failed
        ],
    )
    return Response(
        content=msgspec.json.encode(body),
        status_code=503,
        media_type=PROBLEM_MEDIA_TYPE,
        headers={"Retry-After": str(max(1, omni(request).settings.retry_after_s))},
    )


def _model_status(slot: ModelSlot) -> dict[str, Any]:
    out = {
        "name": slot.name,
        "state": slot.state.value,
        **slot.served_by(),
        "load_ms": slot.load_ms,
        "warmup_ms": slot.warmup_ms,
        "cuda_graphs": slot.cuda_graphs(),
        "limits": slot.model.limits(),
    }
    if slot.graphs_refused:
        out["cuda_graphs_refused"] = slot.graphs_refused
    if slot.error:
        out["error"] = slot.error
    if slot.state is SlotState.FAILED:
        out["rebuilds"] = slot.recovery.attempts  # tried since it went out of service
        if slot.recovery.due is not None:
            out["next_rebuild_s"] = round(max(0.0, slot.recovery.due - time.perf_counter()), 1)
    return out


def _compile(slots: Iterable[ModelSlot]) -> dict[str, bool]:
    """`enabled`: every model on a GPU replays captured CUDA graphs (false with none on a GPU).
    Each model's own `compiled` is exact where they differ."""
    on_gpu = [s for s in slots if s.device and not s.device.startswith("cpu")]
    return {"enabled": bool(on_gpu) and all(s.static_shapes for s in on_gpu)}


def _readiness(request: Request[Any, Any, Any], path: str, model: str | None = None) -> Response[Any]:
    o = omni(request)
    slots = o.registry.slots
    if model is not None:
        try:
            slots = [o.registry.resolve(model)]
        except RequestError as exc:
            raise Problem.from_request_error(exc) from None
    statuses = [_model_status(s) for s in slots]
    s = o.settings
    limits = {"max_body_bytes": s.max_body_bytes, "request_timeout_s": s.request_timeout_s, "queue_size": s.queue_size}
    # /readyz lists the models; /health keys them by name and adds `compile`, the shape that
    # served-Laya clients read a checkpoint's identity from.
    models = statuses if path == "/readyz" else {m["name"]: m for m in statuses}
    extra = {} if path == "/readyz" else {"compile": _compile(slots)}
    if slots and all(slot.state is SlotState.READY for slot in slots):
        body = {"status": "ready", "models": models, **extra, "limits": limits}
        return Response(content=msgspec.json.encode(body), media_type="application/json")
    detail = (
        "no models are configured (set OMNI_MODELS)"
        if not statuses
        else "not every model is warm: "
        + ", ".join("%s is %s" % (m["name"], m["state"]) for m in statuses if m["state"] != "ready")
    )
    body = _problem(request, "not_ready", detail, models=models, **extra, limits=limits)
    return Response(
        content=msgspec.json.encode(body),
        status_code=503,
        media_type=PROBLEM_MEDIA_TYPE,
        headers={"Retry-After": str(max(1, s.retry_after_s))},
    )


@get("/readyz", summary="Every model loaded and warmed up (or the one `model` names)", tags=["health"])
async def readyz(request: Request[Any, Any, Any], model: str | None = None) -> Response[Any]:
    """200 when every model is ready: a replica is in rotation only while it serves all it lists.
    `?model=NAME` (a name or alias): that model alone, for a balancer that routes by model."""
    return _readiness(request, "/readyz", model)


@get("/health", summary="Readiness, with the models keyed by name", tags=["health"])
async def health(request: Request[Any, Any, Any]) -> Response[Any]:
    return _readiness(request, "/health")


@get("/metrics", summary="Prometheus metrics", tags=["health"], media_type="text/plain")
async def metrics(request: Request[Any, Any, Any]) -> Response[Any]:
    o = omni(request)
    o.metrics.queue_depth.set(o.engine.executor.depth())
    return Response(content=o.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")
