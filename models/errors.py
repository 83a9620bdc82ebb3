"""Model-neutral request errors, raised by preparation and finishing, rendered by the app.

Each carries the HTTP status and the stable `code` of the contract (docs/api.md), a
`detail` for people and, for per-question problems, `errors` listing every invalid question.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Callable, Mapping


class RequestError(Exception):
    """A client mistake: never a 5xx."""

    status = 422
    code = "invalid_request"

    def __init__(
        self,
        detail: str,
        *,
        errors: list[dict[str, Any]] | None = None,
        status: int | None = None,
        code: str | None = None,
    ):
        super().__init__(detail)
        self.detail = detail
        self.errors = errors or []
        if status is not None:
            self.status = status
        if code is not None:
            self.code = code


class InvalidQuestions(RequestError):
    """One or more questions are invalid; `errors` has one entry per question id."""

    code = "invalid_question"


class UnknownModel(RequestError):
    code = "unknown_model"


class TooManyQuestions(RequestError):
    status = 413
    code = "too_many_questions"


class InputTooLong(RequestError):
    status = 413
    code = "input_too_long"


class TooLarge(RequestError):
    status = 413
    code = "too_large"


class InferenceFailed(Exception):
    """The forward pass failed or produced non-finite outputs (500 `inference_failed`)."""


def questions_of(body: Mapping[str, Any], max_questions: int) -> dict[str, Any]:
    """The request's `questions`: a non-empty object of at most `max_questions` entries, or the
    contract's error (422, or 413 too_many_questions). Every family checks this the same way."""
    questions = body.get("questions")
    if not isinstance(questions, dict):
        raise RequestError("'questions' must be an object of question id -> question")
    if not questions:
        raise RequestError("'questions' must hold at least one question")
    if len(questions) > max_questions:
        raise TooManyQuestions(
            "%d questions; this model takes at most %d per request" % (len(questions), max_questions)
        )
    return questions


def check_questions(questions: Mapping[str, Any], check: Callable[[str, Any], str | None]) -> None:
    """Run `check(qid, question) -> problem or None` on every question and report all the
    problems at once (422 invalid_question), so a client fixes its request in one round."""
    errors: list[dict[str, Any]] = []
    for qid, qdef in questions.items():
        problem = check(qid, qdef)
        if problem:
            errors.append({"question": qid, "detail": problem})
    if errors:
        raise InvalidQuestions("%d of %d questions are invalid" % (len(errors), len(questions)), errors=errors)
