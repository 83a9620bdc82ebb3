"""Open-Jev preparation: validate the whole request, build one independent Yes/No prompt per
candidate, chat-wrap and tokenize it, and refuse (never truncate) an over-long candidate.

    prepare(body, tokenizer, export, limits=LIMITS, names=(), profile="reference") -> (rows, context, usage)
        body       the decoded request object
        tokenizer  models.tokenizer.TokenizerHandle of the export
        export     checkpoint.MergedExport: temperature, max_length, chat prefix/suffix, head
        names      the export's served name and aliases, which `model` may say besides upstream's
        profile    the response profile (`jev` accepts what the hosted API accepts; see below)
        rows       list[CandidateRow], grouped by question then candidate, in request order
        context    Context: everything finish.finish needs besides the hidden states
        usage      {"input_tokens": Σ candidate lengths, "output_tokens": 0}
    compile_request(body, variant, limits=LIMITS, names=(), profile="reference") -> (state_text, list[Question])
        validation and prompt texts only (no tokenizer)
    prompts(state_text, question) -> list[str]       the unwrapped candidate prompts

A port of Open-Jev's `compile_request` (its source at 3308a15) as system1-omni's native worker runs it
(models.md §4.2): every request error is raised before anything is tokenized, and every
candidate is checked against max_length before any forward pass. The `jev` profile accepts,
as the hosted Jev API does, one-sided noul criteria (the missing side in Laya's default words)
and a noul without `instructions` (its criteria are its text).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from collections.abc import Mapping, Sequence

import numpy as np

from models.errors import InputTooLong, InvalidQuestions, RequestError, TooLarge, UnknownModel, questions_of
from models.open_jev.checkpoint import MergedExport, Variant
from models.render import json_key, json_kind as _kind, render
from models.tokenizer import TokenizerHandle

KINDS = ("choice", "score", "noul")
# A one-sided noul's missing side, in the jev profile: Laya's words for it (models/laya/prepare.py).
NOUL_DEFAULTS = {"true": "yes, the statement holds", "false": "no, the statement does not hold"}
ENCODE_CHUNK = 256  # prompts per encode_batch call: bounds the memory held as Encodings


@dataclass(frozen=True)
class OpenJevLimits:
    max_questions: int = 4096
    max_candidates: int = 65_536
    max_choice_options: int = 255
    min_score_levels: int = 2
    max_score_levels: int = 10


LIMITS = OpenJevLimits()


def render_value(value: Any) -> str:
    """Strings unchanged; anything else as json.dumps(v, ensure_ascii=False, sort_keys=True)."""
    return render(value, sort_keys=True)


@dataclass
class Question:
    qid: str
    kind: str  # "choice" | "score" | "noul"
    keys: list[str]  # answer keys in request order; noul: ["false", "true"]
    instructions: str  # rendered; a noul's criteria already appended
    options: list[str]  # one rendered option per choice/score candidate; noul: []
    legend: dict | None = None  # score: {"i": the raw level}

    @property
    def candidates(self) -> int:
        return 1 if self.kind == "noul" else len(self.options)


@dataclass
class CandidateRow:
    ids: np.ndarray  # int32 token ids of one chat-wrapped candidate, unpadded
    question: int  # index into Context.questions


@dataclass
class Context:
    questions: list[Question]
    export: MergedExport  # shared, not copied: temperature, max_length, head, identity
    input_tokens: int
    candidates: int
    started: float  # time.perf_counter() when tokenization began (upstream's clock)


def _description(value: Any, what: str) -> str:
    if not isinstance(value, (str, dict, list)):
        raise ValueError("%s must be text, an object, or an array, got %s" % (what, _kind(value)))
    return render_value(value)


def compile_question(qid: str, qdef: Any, limits: OpenJevLimits = LIMITS, profile: str = "reference") -> Question:
    """One question's options and keys; ValueError with the reason when it is invalid."""
    if not isinstance(qdef, dict):
        raise ValueError("question definition must be an object, got %s" % _kind(qdef))
    kind = qdef.get("type")
    if kind not in KINDS:
        raise ValueError("question type must be choice, score, or noul, got %r" % (kind,))
    criteria = qdef.get("criteria")
    jev_noul = profile == "jev" and kind == "noul"
    if "instructions" in qdef:
        instructions = _description(qdef["instructions"], "'instructions'")
    elif jev_noul and isinstance(criteria, dict) and criteria:
        instructions = _description(criteria, "'criteria'")
    else:
        raise ValueError("'instructions' is required: text, an object, or an array")
    if kind == "choice":
        if not isinstance(criteria, dict):
            raise ValueError(
                "a choice question takes 'criteria' as an object of option -> "
                "description (or null), got %s" % _kind(criteria)
            )
        if not 1 <= len(criteria) <= limits.max_choice_options:
            raise ValueError(
                "a choice question takes 1 to %d options, got %d" % (limits.max_choice_options, len(criteria))
            )
        keys, options = [], []
        for key, value in criteria.items():
            key = json_key(key)
            keys.append(key)
            options.append(key if value is None else "%s: %s" % (key, _description(value, "option %r" % key)))
        return Question(qid, kind, keys, instructions, options)
    if kind == "score":
        if not isinstance(criteria, list):
            raise ValueError(
                "a score question takes 'criteria' as an array of level descriptions, got %s" % _kind(criteria)
            )
        if not limits.min_score_levels <= len(criteria) <= limits.max_score_levels:
            raise ValueError(
                "a score question takes %d to %d levels, got %d"
                % (limits.min_score_levels, limits.max_score_levels, len(criteria))
            )
        # No "level i:" prefix: the option is the level's text itself.
        options = [_description(level, "level %d" % i) for i, level in enumerate(criteria)]
        keys = [str(i) for i in range(len(criteria))]
        return Question(qid, kind, keys, instructions, options, legend=dict(zip(keys, criteria, strict=True)))
    if criteria is not None:
        # Both sides or neither (upstream); the jev profile also takes one side, or null sides.
        sides = {"true", "false"}
        given = set(criteria) if isinstance(criteria, dict) else None
        if given is None or not (given == sides or jev_noul and given and given <= sides):
            raise ValueError(
                "noul criteria must contain exactly the keys 'true' and 'false'"
                + (" (or one of them)" if jev_noul else "")
            )
        if jev_noul:
            criteria = {k: NOUL_DEFAULTS[k] if criteria.get(k) in (None, "") else criteria[k] for k in sides}
        instructions += "\nYes means: %s\nNo means: %s" % (
            _description(criteria["true"], "noul criterion 'true'"),
            _description(criteria["false"], "noul criterion 'false'"),
        )
    return Question(qid, kind, ["false", "true"], instructions, [])


def check_model(body: Mapping[str, Any], variant: Variant, names: Sequence[str] = ()) -> None:
    """The request's `model` names this export: upstream's names of the variant, or `names` (the
    export's served name and aliases, from its manifest)."""
    model = body.get("model")
    if variant.serves(model):
        return
    if isinstance(model, str) and model.strip().lower() in {n.lower() for n in names}:
        return
    raise UnknownModel(
        "requested model %r is not loaded; this server answers as %s"
        % (model, ", ".join(dict.fromkeys((*names, *variant.names))))
    )


def compile_request(
    body: Mapping[str, Any],
    variant: Variant,
    limits: OpenJevLimits = LIMITS,
    names: Sequence[str] = (),
    profile: str = "reference",
) -> tuple[str, list[Question]]:
    """Validate the whole request; (rendered state, questions). Raises RequestError subclasses."""
    if not isinstance(body, Mapping):
        raise RequestError("the request must be a JSON object")
    check_model(body, variant, names)
    if "state" not in body:
        raise RequestError("'state' is required: text, a JSON object, or an array")
    state = body["state"]
    if not isinstance(state, (str, dict, list)):
        raise RequestError("'state' must be text, a JSON object, or an array, got %s" % _kind(state))
    questions = questions_of(body, limits.max_questions)
    compiled, errors = [], []
    for qid, qdef in questions.items():
        try:
            compiled.append(compile_question(json_key(qid), qdef, limits, profile))
        except ValueError as exc:
            errors.append({"question": json_key(qid), "detail": str(exc)})
    if errors:
        raise InvalidQuestions("%d of %d questions are invalid" % (len(errors), len(questions)), errors=errors)
    total = sum(q.candidates for q in compiled)
    if total > limits.max_candidates:
        raise TooLarge(
            "%d candidate sequences; this model takes at most %d per request" % (total, limits.max_candidates)
        )
    return render_value(state), compiled


def prompts(state_text: str, question: Question) -> list[str]:
    """The candidate prompts of one question, before chat wrapping."""
    context = "Context:\n%s\n\nQuestion: %s\n" % (state_text, question.instructions)
    if question.kind == "noul":
        return [context + "Is the answer to this question yes? Answer Yes or No."]
    return [
        context + "Proposed answer: %s\nIs this proposed answer correct? Answer Yes or No." % option
        for option in question.options
    ]


def wrap(prompt: str, export: MergedExport) -> str:
    return export.chat_prefix + prompt.strip() + export.chat_suffix


def encode_question(
    state_text: str, question: Question, tokenizer: TokenizerHandle, export: MergedExport
) -> list[np.ndarray]:
    """Token ids of each chat-wrapped candidate; InputTooLong on the first one over max_length."""
    texts = [wrap(p, export) for p in prompts(state_text, question)]
    rows = []
    for start in range(0, len(texts), ENCODE_CHUNK):
        for ids in tokenizer.encode_batch(texts[start : start + ENCODE_CHUNK]):
            if len(ids) > export.max_length:
                detail = "question %s: %d tokens exceeds max_length=%d; no silent truncation" % (
                    question.qid,
                    len(ids),
                    export.max_length,
                )
                raise InputTooLong(detail, errors=[{"question": question.qid, "detail": detail}])
            rows.append(np.asarray(ids, dtype=np.int32))
    return rows


def prepare(
    body: Mapping[str, Any],
    tokenizer: TokenizerHandle,
    export: MergedExport,
    limits: OpenJevLimits = LIMITS,
    names: Sequence[str] = (),
    profile: str = "reference",
) -> tuple[list[CandidateRow], Context, dict]:
    """Validate, then tokenize question by question; the whole request fails on the first
    over-long candidate, before any forward pass and without tokenizing later questions."""
    state_text, questions = compile_request(body, export.variant, limits, names, profile)
    started = time.perf_counter()
    rows: list[CandidateRow] = []
    for index, question in enumerate(questions):
        rows.extend(CandidateRow(ids, index) for ids in encode_question(state_text, question, tokenizer, export))
    input_tokens = sum(len(r.ids) for r in rows)
    context = Context(questions, export, input_tokens, len(rows), started)
    return rows, context, {"input_tokens": input_tokens, "output_tokens": 0}


__all__ = [
    "OpenJevLimits",
    "LIMITS",
    "Question",
    "CandidateRow",
    "Context",
    "render_value",
    "compile_question",
    "compile_request",
    "prompts",
    "wrap",
    "prepare",
]
