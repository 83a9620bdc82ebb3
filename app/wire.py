"""Wire types of the HTTP contract (docs/api.md), as msgspec structs.

Requests are validated per model (each model accepts a different subset of the Jev API), so
these types document the protocol in /schema and type the fixed-shape responses; decision
responses are model-shaped dicts encoded with msgspec. Answers are typed per profile: the
fields every model gives, and the optional ones some models add (models.md).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

Text = str | dict[str, Any] | list[Any] | int | float


class ChoiceQuestion(msgspec.Struct, tag="choice", tag_field="type"):
    instructions: str | dict[str, Any] | list[Any] | int | float
    criteria: dict[str, str | dict[str, Any] | list[Any] | int | float | None] | list[str | int | float | bool]


class ScoreQuestion(msgspec.Struct, tag="score", tag_field="type"):
    instructions: str | dict[str, Any] | list[Any] | int | float
    criteria: list[str | dict[str, Any] | list[Any] | int | float]


class NoulQuestion(msgspec.Struct, tag="noul", tag_field="type"):
    """`instructions` may be left out in the `jev` profile: the criteria are then the text."""

    instructions: Text | UnsetType = UNSET
    criteria: dict[str, str | dict[str, Any] | list[Any] | int | float | None] | None = None


Question = ChoiceQuestion | ScoreQuestion | NoulQuestion


class SystemOneRequest(msgspec.Struct):
    """POST /v1/systemone. Unknown top-level fields are ignored."""

    state: str | dict[str, Any] | list[Any]
    questions: dict[str, Question]
    model: str | None = None


class Usage(msgspec.Struct):
    input_tokens: int
    output_tokens: int


class ReferenceUsage(Usage):
    """Laya and Clef-Flash add how much of the state was cut to fit."""

    state_tokens: int | UnsetType = UNSET
    state_tokens_dropped: int | UnsetType = UNSET
    truncated: bool | UnsetType = UNSET
    truncated_questions: list[str] | UnsetType = UNSET


class Action(msgspec.Struct):
    act_probability: float


class ChoiceAnswer(msgspec.Struct, tag="choice", tag_field="type"):
    """`probabilities` keyed by option, normalised. Laya's `confidence` is 1 − normalised entropy."""

    choice: str
    probabilities: dict[str, float]
    confidence: float
    answer_confidence: float | UnsetType = UNSET
    action: Action | UnsetType = UNSET
    x_jev_confidence: float | UnsetType = UNSET


class ScoreAnswer(msgspec.Struct, tag="score", tag_field="type"):
    """`score` = Σ i·p_i; `probabilities` and `legend` keyed "0"…"n-1"."""

    score: float
    probabilities: dict[str, float]
    legend: dict[str, Any]
    confidence: float
    answer_confidence: float | UnsetType = UNSET
    action: Action | UnsetType = UNSET
    x_jev_confidence: float | UnsetType = UNSET


class NoulAnswer(msgspec.Struct, tag="noul", tag_field="type"):
    """`noul`: the probability of yes."""

    noul: float
    confidence: float | UnsetType = UNSET
    answer_confidence: float | UnsetType = UNSET
    action: Action | UnsetType = UNSET


Answer = ChoiceAnswer | ScoreAnswer | NoulAnswer


class JevChoiceAnswer(msgspec.Struct, tag="choice", tag_field="type"):
    """Jev's confidence (p_max − 1/n)/(1 − 1/n). `x_option_rows`: the rows a Laya choice too large
    for one was spread over, its option logits in one softmax."""

    choice: str
    probabilities: dict[str, float]
    confidence: float
    x_confidence: float | UnsetType = UNSET
    x_answer_confidence: float | UnsetType = UNSET
    x_action: Action | UnsetType = UNSET
    x_option_rows: int | UnsetType = UNSET


class JevScoreAnswer(msgspec.Struct, tag="score", tag_field="type"):
    score: float
    probabilities: dict[str, float]
    legend: dict[str, Any]
    confidence: float
    x_confidence: float | UnsetType = UNSET
    x_answer_confidence: float | UnsetType = UNSET
    x_action: Action | UnsetType = UNSET


class JevNoulAnswer(msgspec.Struct, tag="noul", tag_field="type"):
    """No `confidence`, as in Jev."""

    noul: float
    x_confidence: float | UnsetType = UNSET
    x_answer_confidence: float | UnsetType = UNSET
    x_action: Action | UnsetType = UNSET


JevAnswer = JevChoiceAnswer | JevScoreAnswer | JevNoulAnswer


class ServedBy(msgspec.Struct):
    checkpoint: str | None
    revision: str | None
    device: str | None
    weights_dtype: str
    runtime: str | None
    compiled: bool = False  # the model replays captured CUDA graphs
    random_weights: bool = False


class SystemOneResponse(msgspec.Struct):
    """The `reference` profile: answers in request order, and what each model adds."""

    model: str
    answers: dict[str, Answer]
    usage: ReferenceUsage
    served_by: ServedBy
    routing: dict[str, Any] | UnsetType = UNSET  # Laya
    metadata: dict[str, Any] | UnsetType = UNSET  # Open-Jev


class JevSystemOneResponse(msgspec.Struct):
    """The `jev` profile (`Prefer: profile=jev`): Jev's core; everything else prefixed `x_`."""

    model: str
    answers: dict[str, JevAnswer]
    usage: Usage
    x_served_by: ServedBy
    x_usage: dict[str, Any] | UnsetType = UNSET
    x_routing: dict[str, Any] | UnsetType = UNSET
    x_metadata: dict[str, Any] | UnsetType = UNSET
    x_model: str | UnsetType = UNSET


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


class JevValidationItem(msgspec.Struct):
    loc: list[str | int]
    msg: str
    type: str  # the problem's code


class JevValidationError(msgspec.Struct):
    """A 422 in the `jev` profile (and a 400, which is 422 there)."""

    detail: list[JevValidationItem]


class JevErrorDetail(msgspec.Struct):
    error_type: str  # the code; Jev's names for unauthorized, overloaded, not_ready, inference_failed
    message: str


class JevError(msgspec.Struct):
    """Any other error in the `jev` profile."""

    detail: JevErrorDetail


class ModelStatus(msgspec.Struct):
    name: str
    state: Literal["loading", "warming", "ready", "failed"]
    checkpoint: str | None
    revision: str | None
    device: str | None
    weights_dtype: str
    runtime: str | None
    load_ms: float | None
    warmup_ms: float | None
    cuda_graphs: str
    limits: dict[str, Any]
    random_weights: bool | UnsetType = UNSET
    cuda_graphs_refused: str | UnsetType = UNSET
    error: str | UnsetType = UNSET


class ServerLimits(msgspec.Struct):
    max_body_bytes: int
    request_timeout_s: float
    queue_size: int


class Ready(msgspec.Struct):
    status: Literal["ready"]
    models: list[ModelStatus]
    limits: ServerLimits


class NotReady(ProblemDetails):
    """503 `not_ready`: a model is loading, warming or failed."""

    models: list[ModelStatus] = []
    limits: ServerLimits | None = None


class ModelEntry(msgspec.Struct):
    name: str
    description: str
    aliases: list[str]
    release_date: str
    family: str
    checkpoint: str | None
    revision: str | None
    random_weights: bool
    weights_dtype: str
    limits: dict[str, Any]
    state: Literal["loading", "warming", "ready", "failed"]
    served_by: ServedBy


class ModelList(msgspec.Struct):
    """Each entry also carries its family's own fields (models.md)."""

    models: list[ModelEntry]


class Status(msgspec.Struct):
    status: Literal["ok"]
