"""GET /v1/models and GET /schema (the OpenAPI document)."""
from __future__ import annotations

import logging

import msgspec
from litestar import Request, Response, get
from litestar.datastructures import CacheControlHeader
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.static_files import create_static_files_router

from app.routes.common import check_auth, omni
from app.wire import ProblemDetails, SystemOneRequest, SystemOneResponse

log = logging.getLogger("omni")
SWAGGER_ASSETS = "/schema/assets"


@get("/v1/models", summary="Loaded models, their aliases and limits", tags=["discovery"])
async def list_models(request: Request) -> Response:
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


def openapi_document(app) -> dict:
    """Litestar's document, plus the decision route described by its wire types (a raw ASGI
    handler, which Litestar leaves out of the document)."""
    doc = app.openapi_schema.to_schema()
    (schemas,), components = msgspec.json.schema_components(
        [SystemOneRequest], ref_template="#/components/schemas/{name}")
    (response_schema, problem_schema), more = msgspec.json.schema_components(
        [SystemOneResponse, ProblemDetails], ref_template="#/components/schemas/{name}")
    doc.setdefault("components", {}).setdefault("schemas", {}).update({**components, **more})
    op = doc.setdefault("paths", {}).setdefault("/v1/systemone", {}).setdefault("post", {})
    op.update(summary="Answer typed questions about a state", operationId="systemone", tags=["decisions"])
    op["requestBody"] = {"required": True, "content": {"application/json": {"schema": schemas}}}
    problem = {"content": {"application/problem+json": {"schema": problem_schema}}}
    op["responses"] = {
        "200": {"description": "Answers in request order",
                "content": {"application/json": {"schema": response_schema}}},
        **{str(code): {"description": text, **problem} for code, text in (
            (400, "malformed_request"), (401, "unauthorized"), (408, "request_timeout"),
            (411, "length_required"), (413, "too_large, too_many_questions, input_too_long"),
            (415, "unsupported_media_type"), (422, "invalid_request, invalid_question, unknown_model"),
            (431, "headers_too_large"), (500, "inference_failed, internal_error"), (503, "overloaded, not_ready"),
            (504, "deadline_exceeded"))}}
    return doc


@get("/schema", summary="OpenAPI document", tags=["discovery"], include_in_schema=False)
async def schema(request: Request) -> Response:
    return Response(content=msgspec.json.encode(openapi_document(request.app)), media_type="application/json")


def swagger_ui() -> tuple[SwaggerRenderPlugin, list]:
    """(the /schema/docs plugin, the routes of its assets): Swagger UI's script, stylesheet and
    icon come from the swagger-ui-bundle-v2 package under /schema/assets, never from a CDN, so the
    page works on an air-gapped node and loads no third-party code."""
    try:
        from swagger_ui_bundle import swagger_ui_path
    except ImportError:
        log.warning("swagger-ui-bundle-v2 is not installed: /schema/docs has no Swagger UI to load")
        routes = []
    else:
        routes = [create_static_files_router(SWAGGER_ASSETS, directories=[swagger_ui_path], name="swagger-ui",
                                             cache_control=CacheControlHeader(max_age=86400))]
    plugin = SwaggerRenderPlugin(
        js_url=SWAGGER_ASSETS + "/swagger-ui-bundle.js", css_url=SWAGGER_ASSETS + "/swagger-ui.css",
        standalone_preset_js_url=SWAGGER_ASSETS + "/swagger-ui-standalone-preset.js",
        favicon="<link rel='icon' type='image/png' href='%s/favicon-32x32.png'>" % SWAGGER_ASSETS)
    return plugin, routes
