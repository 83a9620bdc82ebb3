"""GET /v1/models and GET /schema (the OpenAPI document)."""

from __future__ import annotations

import logging
from typing import Any, TypeVar

import msgspec
from litestar import Litestar, Request, Response, Router, get
from litestar.datastructures import CacheControlHeader
from litestar.openapi.plugins import OpenAPIRenderPlugin, SwaggerRenderPlugin
from litestar.static_files import create_static_files_router

from app import wire
from app.routes.common import check_auth, omni

log = logging.getLogger("omni")
SWAGGER_ASSETS = "/schema/assets"
Plugin = TypeVar("Plugin", bound=OpenAPIRenderPlugin)


@get("/v1/models", summary="Loaded models, their aliases and limits", tags=["discovery"])
async def list_models(request: Request[Any, Any, Any]) -> Response[Any]:
    o = omni(request)
    check_auth(request.headers, o.settings)
    models = []
    for slot in o.registry.slots:
        entry = slot.model.describe()
        if slot is o.registry.default:
            entry["aliases"] = entry["aliases"] + ["jev-latest"]
        entry.update(state=slot.state.value, served_by=slot.served_by())
        models.append(entry)
    return Response(content=msgspec.json.encode({"models": models}), media_type="application/json")


REF = "#/components/schemas/{name}"
# The problems of the decision route: status -> (codes, when).
PROBLEMS = {
    400: ("malformed_request", "The body is not JSON, or not an object (a 422 in the `jev` profile)."),
    401: ("unauthorized", "A missing or wrong bearer token (when `OMNI_API_KEY` is set)."),
    408: ("request_timeout", "The body did not arrive in time."),
    411: ("length_required", "Neither Content-Length nor chunked transfer."),
    413: ("too_large, too_many_questions, input_too_long", "The body, or the request for the model, is too large."),
    415: ("unsupported_media_type", "Not JSON, or an unknown Content-Encoding."),
    422: (
        "invalid_request, invalid_question, unknown_model, malformed_request (jev profile)",
        "The request cannot be answered; `errors` (`detail[]` in the `jev` profile) lists every invalid question.",
    ),
    431: ("headers_too_large", "Request headers over 64 KiB in all (names and values)."),
    500: ("inference_failed, internal_error", "The forward pass failed, or an unexpected error (logged)."),
    503: (
        "overloaded, not_ready",
        "The queue is full or the server shuts down (where hosted Jev answers 429 "
        "`rate_limit_error`), or the model is not ready. Retry after `Retry-After` seconds.",
    ),
    504: ("deadline_exceeded", "Not answered within the request timeout."),
}
_STRING = {"type": "string"}
_HEADERS = {
    "X-Request-Id": {
        "description": "The request's id: the client's when valid, else a generated one.",
        "schema": _STRING,
    },
    "Server-Timing": {"description": "Time spent in each stage the request reached, in ms.", "schema": _STRING},
}
_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}}
_WWW_AUTHENTICATE = {"WWW-Authenticate": {"description": 'Bearer realm="system1-omni"', "schema": _STRING}}
_PARAMETERS = [
    {
        "name": "Prefer",
        "in": "header",
        "required": False,
        "schema": _STRING,
        "example": "profile=jev",
        "description": "`profile=jev` or `profile=reference`: the response profile (default `OMNI_PROFILE`).",
    },
    {
        "name": "X-Request-Id",
        "in": "header",
        "required": False,
        "schema": {"type": "string", "maxLength": 128},
        "description": "The client's request id (1-128 visible ASCII characters), echoed on the response.",
    },
    {
        "name": "Content-Encoding",
        "in": "header",
        "required": False,
        "schema": {"type": "string", "enum": ["identity", "gzip", "x-gzip", "zstd"]},
    },
    {
        "name": "traceparent",
        "in": "header",
        "required": False,
        "schema": _STRING,
        "description": "W3C trace context: the server's spans join the caller's trace.",
    },
]


def openapi_document(app: Litestar) -> dict[str, Any]:
    """Litestar's document of its routes, completed: the decision route (a raw ASGI handler,
    which Litestar leaves out) described by its wire types, typed health and model responses,
    every problem in both profiles' shapes, and the bearer scheme when a key is set."""
    doc: dict[str, Any] = app.openapi_schema.to_schema()
    types = (
        wire.SystemOneRequest,
        wire.SystemOneResponse,
        wire.JevSystemOneResponse,
        wire.ProblemDetails,
        wire.JevValidationError,
        wire.JevError,
        wire.Ready,
        wire.NotReady,
        wire.ModelList,
        wire.Status,
    )
    found, components = msgspec.json.schema_components(types, ref_template=REF)
    ref = {t.__name__: schema for t, schema in zip(types, found, strict=True)}
    doc.setdefault("components", {}).setdefault("schemas", {}).update(components)
    paths = doc.setdefault("paths", {})

    def problem(status: int) -> dict[str, Any]:
        codes, when = PROBLEMS[status]
        content = {"application/problem+json": {"schema": ref["ProblemDetails"]}}
        if status != 400:  # the jev profile answers a 400 as 422
            content["application/json"] = {"schema": ref["JevValidationError" if status == 422 else "JevError"]}
        headers = {
            **_HEADERS,
            **(_RETRY_AFTER if status == 503 else {}),
            **(_WWW_AUTHENTICATE if status == 401 else {}),
        }
        return {"description": "%s: %s" % (codes, when), "headers": headers, "content": content}

    op = paths.setdefault("/v1/systemone", {}).setdefault("post", {})
    op.update(
        summary="Answer typed questions about a state",
        operationId="systemone",
        tags=["decisions"],
        description="Answers in the `reference` profile, or in the hosted Jev API's shape in the `jev` "
        "profile (`Prefer: profile=jev`, or `OMNI_PROFILE=jev`). Errors are RFC 9457 problems "
        "(`application/problem+json`) in the reference profile, Jev's `detail` shapes "
        "(`application/json`) in the jev profile.",
        parameters=_PARAMETERS,
    )
    op["requestBody"] = {"required": True, "content": {"application/json": {"schema": ref["SystemOneRequest"]}}}
    op["responses"] = {
        "200": {
            "description": "Answers in request order, in the request's profile",
            "headers": _HEADERS,
            "content": {
                "application/json": {"schema": {"oneOf": [ref["SystemOneResponse"], ref["JevSystemOneResponse"]]}}
            },
        },
        **{str(status): problem(status) for status in PROBLEMS},
    }
    readyz = paths.get("/readyz", {}).get("get")
    if readyz is not None:
        readyz["responses"] = {
            "200": {
                "description": "Every model is loaded and warm",
                "headers": _HEADERS,
                "content": {"application/json": {"schema": ref["Ready"]}},
            },
            "503": {
                "description": "not_ready: a model is loading, warming up or failed",
                "headers": {**_HEADERS, **_RETRY_AFTER},
                "content": {"application/problem+json": {"schema": ref["NotReady"]}},
            },
        }
    livez = paths.get("/livez", {}).get("get")
    if livez is not None:
        livez.setdefault("responses", {})["200"] = {
            "description": "The process is up",
            "headers": _HEADERS,
            "content": {"application/json": {"schema": ref["Status"]}},
        }
    models = paths.get("/v1/models", {}).get("get")
    if models is not None:
        models["responses"] = {
            "200": {
                "description": "The loaded models",
                "headers": _HEADERS,
                "content": {"application/json": {"schema": ref["ModelList"]}},
            }
        }
    if app.state.omni.settings.api_key:
        doc["components"]["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer", "description": "The key set in `OMNI_API_KEY`."}
        }
        for secured in (op, models):
            if secured is not None:
                secured["security"] = [{"bearer": []}]
                secured["responses"]["401"] = problem(401)
    else:
        op["responses"].pop("401")
    return doc


def serving_the_document(plugin: Plugin) -> Plugin:
    """`plugin`, a Litestar render plugin (Swagger UI, JSON), rendering the document /schema
    serves (`openapi_document`) instead of Litestar's own, which lacks the decision route."""
    render = plugin.render
    # This instance's `render` shadows the class's method; mypy refuses any assignment to a method.
    plugin.render = lambda request, openapi_schema: render(  # type: ignore[method-assign]
        request, openapi_document(request.app)
    )
    return plugin


@get("/schema", summary="OpenAPI document", tags=["discovery"], include_in_schema=False)
async def schema(request: Request[Any, Any, Any]) -> Response[Any]:
    return Response(content=msgspec.json.encode(openapi_document(request.app)), media_type="application/json")


def swagger_ui() -> tuple[SwaggerRenderPlugin, list[Router]]:
    """(the /schema/docs plugin, the routes of its assets): Swagger UI's script, stylesheet and
    icon come from the swagger-ui-bundle-v2 package under /schema/assets, never from a CDN, so the
    page works on an air-gapped node and loads no third-party code."""
    try:
        from swagger_ui_bundle import swagger_ui_path
    except ImportError:
        log.warning("swagger-ui-bundle-v2 is not installed: /schema/docs has no Swagger UI to load")
        routes: list[Router] = []
    else:
        routes = [
            create_static_files_router(
                SWAGGER_ASSETS,
                directories=[swagger_ui_path],
                name="swagger-ui",
                cache_control=CacheControlHeader(max_age=86400),
            )
        ]
    plugin = SwaggerRenderPlugin(
        js_url=SWAGGER_ASSETS + "/swagger-ui-bundle.js",
        css_url=SWAGGER_ASSETS + "/swagger-ui.css",
        standalone_preset_js_url=SWAGGER_ASSETS + "/swagger-ui-standalone-preset.js",
        favicon="<link rel='icon' type='image/png' href='%s/favicon-32x32.png'>" % SWAGGER_ASSETS,
    )
    return plugin, routes
