"""RFC 9457 problem details with the stable codes of the contract, in both response profiles."""

from __future__ import annotations

from typing import Any

import msgspec

from models.errors import RequestError

TITLES = {
    400: "Malformed request",
    401: "Unauthorized",
    404: "Not found",
    405: "Method not allowed",
    408: "Request timeout",
    411: "Length required",
    413: "Content too large",
    415: "Unsupported media type",
    422: "Unprocessable request",
    431: "Request headers too large",
    499: "Client closed request",
    500: "Internal server error",
    503: "Service unavailable",
    504: "Deadline exceeded",
}
# Titles of the codes that share a status with others and need their own.
CODE_TITLES = {"inference_failed": "Inference failed"}
# What hosted-Jev clients branch on, for the codes that differ from ours.
_JEV_ERROR_TYPES = {
    "unauthorized": "authentication_error",
    "overloaded": "rate_limit_error",
    "not_ready": "service_unavailable",
    "inference_failed": "internal_error",
}
PROBLEM_MEDIA_TYPE = "application/problem+json"


class Problem(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        errors: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(detail)
        self.status, self.code, self.detail = status, code, detail
        self.errors = errors or []
        self.headers = dict(headers or {})

    @classmethod
    def from_request_error(cls, exc: RequestError) -> Problem:
        return cls(exc.status, exc.code, exc.detail, errors=exc.errors)

    def render(self, instance: str, profile: str) -> tuple[bytes, str]:
        """(body, media type) for this problem in `profile`."""
        if profile == "jev":
            if self.status == 422:
                items = [
                    {"loc": ["body", "questions", e.get("question")], "msg": e.get("detail"), "type": self.code}
                    for e in self.errors
                ] or [{"loc": ["body"], "msg": self.detail, "type": self.code}]
                return msgspec.json.encode({"detail": items}), "application/json"
            jev = {"detail": {"error_type": _JEV_ERROR_TYPES.get(self.code, self.code), "message": self.detail}}
            return msgspec.json.encode(jev), "application/json"
        body: dict[str, Any] = {
            "type": "https://system1-omni.dev/problems/" + self.code.replace("_", "-"),
            "title": CODE_TITLES.get(self.code) or TITLES.get(self.status, "Error"),
            "status": self.status,
            "code": self.code,
            "detail": self.detail,
            "instance": instance,
        }
        if self.errors:
            body["errors"] = self.errors
        return msgspec.json.encode(body), PROBLEM_MEDIA_TYPE


def malformed(detail: str) -> Problem:
    return Problem(400, "malformed_request", detail)


def retry_later(status: int, code: str, detail: str, seconds: int) -> Problem:
    return Problem(status, code, detail, headers={"Retry-After": str(max(1, int(seconds)))})
