"""Helpers the handlers share: the app's runtime objects, profile choice, auth."""
from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass

from app.config import PROFILES, Settings
from app.metrics import Metrics
from app.problems import Problem
from app.runtime.registry import Registry
from app.serving import Engine

log = logging.getLogger("omni")


@dataclass
class Omni:
    settings: Settings
    registry: Registry
    engine: Engine
    metrics: Metrics


def omni(request) -> Omni:
    return request.app.state.omni


def profile_of(headers, settings: Settings) -> str:
    """`Prefer: profile=jev|reference` per request, else the configured default. `headers`: a
    mapping of lower-case names (a Litestar request's headers, or routes.systemone.headers_of)."""
    for part in headers.get("prefer", "").split(","):
        key, _, value = part.strip().partition("=")
        if key.strip().lower() == "profile" and value.strip().strip('"') in PROFILES:
            return value.strip().strip('"')
    return settings.profile


def problem_reply(o: Omni, scope, problem: Problem, headers) -> tuple[bytes, str]:
    """(body, media type) of `problem` for this request, in its profile; counted by code, and
    recorded on the request's span. Litestar's exception handlers and the direct route
    (routes/systemone.direct) both answer with it. `headers`: as for profile_of. In the `jev`
    profile a body Jev cannot read is a validation failure: its 400 is answered as 422 (the
    problem's status is set to that)."""
    profile = scope.get("omni.profile") or profile_of(headers, o.settings)
    if profile == "jev" and problem.status == 400:
        problem.status = 422
    body, media = problem.render(scope.get("omni.request_id", ""), profile)
    timing = scope.get("omni.timing")
    if timing is not None and timing.span is not None:
        timing.span.set_attributes({"omni.error.code": problem.code, "omni.error.detail": problem.detail[:500]})
    scope["omni.error"] = problem.code
    o.metrics.errors.labels(problem.code, str(problem.status)).inc()
    return body, media


def unexpected(method: str, path: str, exc: BaseException) -> Problem:
    """The 500 `internal_error` for an error no handler expected, logged with its traceback; the
    client learns nothing of it. The app's exception handler, the direct route and the RSGI face
    all answer with it."""
    log.exception("unhandled error on %s %s", method, path, exc_info=exc)
    return Problem(500, "internal_error", "internal error; it is logged")


def check_auth(headers, settings: Settings) -> None:
    """`headers`: as for profile_of."""
    if not settings.api_key:
        return
    header = headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    ok = scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), settings.api_key.encode())
    if not ok:
        raise Problem(401, "unauthorized", "a valid 'Authorization: Bearer <key>' header is required",
                      headers={"WWW-Authenticate": 'Bearer realm="system1-omni"'})
