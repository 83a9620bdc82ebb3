"""Helpers the handlers share: the app's runtime objects, profile choice, auth."""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from litestar import Request

from app.config import PROFILES, Settings
from app.metrics import Metrics
from app.problems import Problem
from app.runtime.registry import Registry
from app.serving import Engine

log = logging.getLogger("omni")
Site = tuple[str, str, int]  # where an error was raised: its type, file and line


@dataclass
class Omni:
    settings: Settings
    registry: Registry
    engine: Engine
    metrics: Metrics


def omni(request: Request[Any, Any, Any]) -> Omni:
    return cast(Omni, request.app.state.omni)


def profile_of(headers: Mapping[str, str], settings: Settings) -> str:
    """`Prefer: profile=jev|reference` per request, else the configured default. `headers`: a
    mapping of lower-case names (a Litestar request's headers, or routes.systemone.headers_of)."""
    for part in headers.get("prefer", "").split(","):
        key, _, value = part.strip().partition("=")
        if key.strip().lower() == "profile" and value.strip().strip('"') in PROFILES:
            return value.strip().strip('"')
    return settings.profile


def problem_reply(o: Omni, scope: dict[str, Any], problem: Problem, headers: Mapping[str, str]) -> tuple[bytes, str]:
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


class Repeats:
    """Which unexpected errors had their traceback logged lately. Requests that hit one bug all
    fail alike: its traceback is logged once per `interval_s` for each place an error is raised
    (its type, file and line), and each repeat in between as one line, so a client repeating a
    failing request cannot flood the log."""

    def __init__(self, interval_s: float = 60.0, sites: int = 1024):
        self.interval_s, self.sites = interval_s, sites
        self.logged: dict[Site, float] = {}
        self.repeats: dict[Site, int] = {}

    @staticmethod
    def site(exc: BaseException) -> Site:
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        return (type(exc).__qualname__,) + ((tb.tb_frame.f_code.co_filename, tb.tb_lineno) if tb else ("?", 0))

    def log(self, method: str, path: str, exc: BaseException) -> None:
        site, now = self.site(exc), time.monotonic()
        last = self.logged.get(site)
        if last is None or now - last >= self.interval_s:
            if len(self.logged) >= self.sites:
                self.logged.clear()
                self.repeats.clear()
            self.logged[site] = now
            repeats = self.repeats.pop(site, 0)
            log.error(
                "unhandled error on %s %s%s",
                method,
                path,
                " (%d more like it since its last traceback)" % repeats if repeats else "",
                exc_info=exc,
            )
            return
        self.repeats[site] = self.repeats.get(site, 0) + 1
        log.error(
            "unhandled error on %s %s: %s at %s:%d (again; its traceback is logged once per %g s)",
            method,
            path,
            site[0],
            site[1],
            site[2],
            self.interval_s,
        )


_repeats = Repeats()


def unexpected(method: str, path: str, exc: BaseException) -> Problem:
    """The 500 `internal_error` for an error no handler expected, logged (with its traceback, the
    first time in a while: Repeats); the client learns nothing of it. The app's exception
    handler, the direct route and the RSGI face all answer with it."""
    _repeats.log(method, path[:200], exc)
    return Problem(500, "internal_error", "internal error; it is logged")


def check_auth(headers: Mapping[str, str], settings: Settings) -> None:
    """`headers`: as for profile_of."""
    if not settings.api_key:
        return
    header = headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    ok = scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), settings.api_key.encode())
    if not ok:
        raise Problem(
            401,
            "unauthorized",
            "a valid 'Authorization: Bearer <key>' header is required",
            headers={"WWW-Authenticate": 'Bearer realm="system1-omni"'},
        )
