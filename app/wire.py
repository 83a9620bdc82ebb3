"""Wire types of the HTTP contract (docs/api.md), as msgspec structs.

Requests are validated per model (each model accepts a different subset of the Jev API), so
these types document the protocol in /schema and type the fixed-shape responses; decision
responses are model-shaped dicts encoded with msgspec.
"""
from __future__ import annotations

from typing import Any, Literal, Union

import msgspec


class ChoiceQuestion(msgspec.Struct, tag="choice", tag_field="type"):
    instructions: Union[str, dict, list, int, float]
    criteria: Union[dict[str, Union[str, dict, list, int, float, None]], list[Union[str, int, float, bool]]]


class ScoreQuestion(msgspec.Struct, tag="score", tag_field="type"):
    instructions: Union[str, dict, list, int, float]
    criteria: list[Union[str, dict, list, int, float]]


class NoulQuestion(msgspec.Struct, tag="noul", tag_field="type"):
    instructions: Union[str, dict, list, int, float]
    criteria: Union[dict[str, Union[str, dict, list, int, float, None]], None] = None


Question = Union[ChoiceQuestion, ScoreQuestion, NoulQuestion]


class SystemOneRequest(msgspec.Struct):
    """POST /v1/systemone. Unknown top-level fields are ignored."""

    state: Union[str, dict[str, Any], list[Any]]
    questions: dict[str, Question]
    model: Union[str, None] = None


class Usage(msgspec.Struct):
    input_tokens: int
    output_tokens: int


class ServedBy(msgspec.Struct):
    checkpoint: Union[str, None]
    revision: Union[str, None]
    device: Union[str, None]
    weights_dtype: str
    runtime: Union[str, None]
    compiled: bool = False          # the model replays captured CUDA graphs
    random_weights: bool = False


class SystemOneResponse(msgspec.Struct):
    model: str
    answers: dict[str, dict[str, Any]]
    usage: Usage
    served_by: Union[ServedBy, None] = None


class QuestionError(msgspec.Struct):
    question: str
    detail: str


class ProblemDetails(msgspec.Struct):
    """RFC 9457 problem (reference profile)."""

    type: str
    title: str
    status: int
    code: str
    detail: str
    instance: str
    errors: list[QuestionError] = []


class Status(msgspec.Struct):
    status: Literal["ok"]
