"""The app factory. Granian serves `app.main:app` (`granian --interface rsgi --workers 1`; it
answers under `--interface asgi` too)."""

from __future__ import annotations

import logging
from typing import Any, cast

import onnxruntime
from litestar import Litestar, Request, Response
from litestar.datastructures import State
from litestar.exceptions import HTTPException, MethodNotAllowedException, NotFoundException
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin
from opentelemetry.sdk.trace import TracerProvider

from app import __version__, logs
from app.config import ConfigError, Settings
from app.metrics import Metrics
from app.middleware import RequestContext
from app.parent_watch import watch_parent
from app.problems import Problem
from app.rsgi import RSGIFace
from app.routes.common import Omni, problem_reply, unexpected
from app.routes import discovery, health, systemone
from app.runtime.registry import Registry
from app.serving import Engine
from app.tracing import Tracing, provider_from_env
from models import registry as model_registry
from models.base import ServedModel
from models.tokenizer import limit_pool

log = logging.getLogger("omni")

# Threads of the tokenizer's own pool (rayon; RAYON_NUM_THREADS wins where set): a turn's few
# short texts gain nothing from one thread per core, whose wake-ups cost CPU on every request.
TOKENIZER_THREADS = 4


def _problem_response(request: Request[Any, Any, Any], problem: Problem) -> Response[Any]:
    # The scope is the ASGI dict the request-context layer records in ("omni.*" keys).
    scope = cast(dict[str, Any], request.scope)
    body, media = problem_reply(request.app.state.omni, scope, problem, request.headers)
    return Response(content=body, status_code=problem.status, media_type=media, headers=problem.headers)


def _on_problem(request: Request[Any, Any, Any], exc: Problem) -> Response[Any]:
    return _problem_response(request, exc)


def _on_http(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    if isinstance(exc, NotFoundException):
        problem = Problem(404, "not_found", "no route %s %s" % (request.method, request.url.path))
    elif isinstance(exc, MethodNotAllowedException):
        problem = Problem(
            405,
            "method_not_allowed",
            "%s is not allowed on %s" % (request.method, request.url.path),
            headers={k: v for k, v in (exc.headers or {}).items() if k.lower() == "allow"},
        )
    elif exc.status_code == 413:
        problem = Problem(413, "too_large", str(exc.detail))
    elif exc.status_code < 500:
        problem = Problem(exc.status_code, "invalid_request", str(exc.detail))
    else:
        log.error("HTTP error %s on %s: %s", exc.status_code, request.url.path, exc.detail)
        problem = Problem(exc.status_code, "internal_error", "internal error")
    return _problem_response(request, problem)


def _on_unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    return _problem_response(request, unexpected(request.method, request.url.path, exc))


def _load(directory: str) -> ServedModel:
    """A served model, or the server stops with one line saying which export it cannot serve and
    why (a missing or stale export, another family's), not a traceback from Granian's worker."""
    try:
        return model_registry.load(directory)
    except (ValueError, OSError) as exc:
        log.error("cannot serve the export in %s: %s", directory, exc)
        raise SystemExit(1) from None


def create_app(settings: Settings | None = None, tracer_provider: TracerProvider | None = None) -> RequestContext:
    """The ASGI app: Litestar routes wrapped in the request-context layer."""
    settings = settings or Settings.from_env()
    # Before any model tokenizes: the tokenizer's pool is built on its first batch call.
    pool = limit_pool(TOKENIZER_THREADS)
    log.info("tokenizer thread pool: %s", pool or "one thread per core")
    models = [_load(directory) for directory in settings.model_dirs()]
    registry = Registry(models, settings.default_model)
    metrics = Metrics()
    metrics.build_info(
        __version__,
        onnxruntime.__version__,
        lambda: ",".join(sorted({s.device for s in registry.slots if s.device})) or settings.device,
    )
    tracing = Tracing(provider_from_env() if tracer_provider is None else tracer_provider)
    engine = Engine(settings, registry, metrics, tracing)
    for model in models:
        if model.manifest.get("random_weights"):
            log.warning("model %s has RANDOM WEIGHTS (a demo/test checkpoint): its answers are random", model.name)
        for note in model.notes():
            log.warning("model %s: %s", model.name, note)
    swagger, swagger_assets = discovery.swagger_ui()
    litestar = Litestar(
        route_handlers=[
            systemone.systemone,
            health.livez,
            health.readyz,
            health.health,
            health.metrics,
            discovery.list_models,
            discovery.schema,
            *swagger_assets,
        ],
        on_startup=[engine.start],
        on_shutdown=[engine.stop],
        exception_handlers={Problem: _on_problem, HTTPException: _on_http, Exception: _on_unexpected},
        openapi_config=OpenAPIConfig(
            title="System1-Omni",
            version=__version__,
            path="/schema/docs",
            render_plugins=[
                discovery.serving_the_document(swagger),
                discovery.serving_the_document(JsonRenderPlugin()),
            ],
            description="System One decision models over POST /v1/systemone",
        ),
        state=State({"omni": Omni(settings, registry, engine, metrics)}),
        request_max_body_size=None,
        logging_config=None,  # logging is configured once, by the process (see _lazy_app)
    )
    # The hot route skips Litestar's router and exception layers (routes/systemone.direct).
    context = RequestContext(litestar, metrics, tracing, direct={"/v1/systemone": systemone.direct(litestar)})
    context.rsgi = RSGIFace(context, litestar.state.omni, hot={"/v1/systemone": systemone.answer})
    return context


def _lazy_app() -> RequestContext:
    logs.configure()  # text until the settings name a format
    try:
        settings = Settings.from_env()
        logs.configure(settings.log_format)
        # In Granian's worker: stop when the main process dies (its in-flight work ends by its deadline).
        watch_parent(settings.request_timeout_s + 5)
        return create_app(settings)
    except ConfigError as exc:  # one line naming the setting, not a traceback from Granian's worker
        log.error("invalid configuration: %s", exc)
        raise SystemExit(1) from None


app = _lazy_app()
