"""Clef-Flash preparation: validate the request, render one joint record, tokenize it fragment by fragment.

A torch-free port of Cloudflare's `encode_record`, `question_options` and `systemone`'s request
checks (joint_schema_model.py, models.md §5.2), plus the hosted limits of §5.4. The whole request
is ONE record: one token sequence holding the state and every question, so the head decides all
questions jointly. The parity tests hold it to identical ids and spans against the vendored file.

    ClefLimits(max_questions=64, min_options=2, max_options=255, min_levels=2, max_levels=10,
               max_state_tokens=65536, max_length=16384)
    question_options(qtype: str, criteria) -> list[tuple[str, Any]]    # upstream option order
    validate(body: Mapping, limits: ClefLimits) -> tuple[Any, dict]    # (state, questions) or raise
    encode_record(tok: TokenizerHandle, state, questions: dict, limits: ClefLimits) -> Record
    prepare_record(body: Mapping, tok: TokenizerHandle, limits: ClefLimits | None = None) -> Record

Errors: `RequestError` (422 invalid_request), `InvalidQuestions` (422 invalid_question, every bad
question listed), `TooManyQuestions` (413), `InputTooLong` (413 input_too_long).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from collections.abc import Mapping

import numpy as np

from models.errors import InputTooLong, RequestError, check_questions, questions_of
from models.render import json_kind, render as _render
from models.tokenizer import TokenizerHandle

QTYPES = {"noul": 0, "choice": 1, "score": 2}  # Clef's type ids (never share: §1.1)
SYSTEM_PROMPT = (
    "Read the complete state and schema. Decide every field jointly. Each answer "
    "must be exactly one of that field's allowed options."
)
PREFIX = "<|im_start|>system\n" + SYSTEM_PROMPT + "<|im_end|>\n<|im_start|>user\nSTATE:\n"
SUFFIX = "\n<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nJOINT SCHEMA DECISIONS:"
SCHEMA_HEADER = "\n\nSCHEMA FIELDS:\n"
NOUL_DEFAULTS = {
    "true": "The proposition is true or the answer is yes.",
    "false": "The proposition is false or the answer is no.",
}


@dataclass
class ClefLimits:
    max_questions: int = 64
    min_options: int = 2  # choice
    max_options: int = 255
    min_levels: int = 2  # score
    max_levels: int = 10
    max_state_tokens: int = 65_536
    max_length: int = 16_384  # the whole record; upstream's default, the graph's token limit


@dataclass(frozen=True)
class Field:
    """One question as finishing needs it."""

    qid: str
    type: str  # "noul" | "choice" | "score"
    keys: tuple[str, ...]  # option ids in upstream order: the order of its logits
    request_keys: tuple[str, ...]  # the same ids in request order (ties and output order)
    legend: tuple | None = None  # score: the raw levels, index order


@dataclass
class Record:
    """One request as the joint graph takes it (§5.5 inputs, unpadded) plus finishing context."""

    input_ids: np.ndarray  # int64 [n]
    question_spans: np.ndarray  # int64 [q, 2], [start, end) of each rendered instruction
    question_types: np.ndarray  # int64 [q], noul 0 / choice 1 / score 2
    option_spans: np.ndarray  # int64 [o, 2], each rendered option object, grouped per question
    option_question: np.ndarray  # int64 [o], question index of each option
    fields: list[Field]
    state_tokens: int  # the rendered state's tokens before truncation
    state_tokens_kept: int

    @property
    def tokens(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def state_tokens_dropped(self) -> int:
        return self.state_tokens - self.state_tokens_kept

    @property
    def truncated(self) -> bool:
        return self.state_tokens_kept < self.state_tokens


def render(value: Any) -> str:
    """§1.2 Clef: compact, sorted keys, unicode kept; strings unchanged."""
    return _render(value, separators=(",", ":"), sort_keys=True)


def question_options(qtype: str, criteria) -> list[tuple[str, Any]]:
    """(option id, description) in upstream order; a None description is left out of the prompt."""
    if qtype == "noul":
        merged = dict(NOUL_DEFAULTS)
        merged.update(criteria or {})
        return [(key, merged[key]) for key in ("true", "false")]
    if qtype == "choice":
        # Sorted by str(key), i.e. by code point; JSON keys are already unique strings.
        return sorted(((str(k), v) for k, v in criteria.items()), key=lambda kv: kv[0])
    return [(str(i), level) for i, level in enumerate(criteria)]


def request_keys(qtype: str, criteria) -> tuple[str, ...]:
    if qtype == "choice":
        return tuple(str(k) for k in criteria)
    if qtype == "score":
        return tuple(str(i) for i in range(len(criteria)))
    return ("true", "false")


def instructions_text(qid: str, qdef: Mapping) -> str:
    ins = qdef.get("instructions")
    # Upstream puts the question id in when instructions are missing, null or "".
    if ins is None or (isinstance(ins, str) and ins == ""):
        ins = str(qid)
    return render(ins)


def check_question(qid: Any, qdef: Any, limits: ClefLimits) -> str | None:
    """The first problem with one question, or None when it can be answered."""
    if not isinstance(qid, str):
        return "question id must be a string"
    if not isinstance(qdef, dict):
        return "definition must be an object, got %s" % json_kind(qdef)
    t = qdef.get("type")
    if not isinstance(t, str) or t not in QTYPES:
        return "unknown type %r; use one of choice, score, noul" % (t,)
    if not instructions_text(qid, qdef):
        return "an empty question id needs non-empty 'instructions'"
    crit = qdef.get("criteria")
    if t == "choice":
        if not isinstance(crit, dict) or not crit:
            return "a choice question takes 'criteria' as a non-empty object of option id -> description (or null)"
        if not limits.min_options <= len(crit) <= limits.max_options:
            return "a choice question takes %d to %d options, got %d" % (
                limits.min_options,
                limits.max_options,
                len(crit),
            )
    elif t == "score":
        if not isinstance(crit, list) or not crit:
            return "a score question takes 'criteria' as a non-empty list of level descriptions, index 0 first"
        if not limits.min_levels <= len(crit) <= limits.max_levels:
            return "a score question takes %d to %d levels, got %d" % (limits.min_levels, limits.max_levels, len(crit))
    elif crit is not None:
        if not isinstance(crit, dict):
            return "a noul question takes 'criteria' as an object with optional 'true'/'false' descriptions"
        extra = sorted(str(k) for k in crit if k not in ("true", "false"))
        if extra:
            # Upstream would ignore them silently; a misspelt side is a client mistake.
            return "a noul question takes 'criteria' keyed only 'true'/'false', got %s" % extra
    return None


def validate(body: Mapping[str, Any], limits: ClefLimits) -> tuple[Any, dict]:
    """Request-level and per-question checks (§5.2, §5.4); returns (state, questions)."""
    if "model" in body and not isinstance(body["model"], str):
        raise RequestError("'model' must be a string")
    if "state" not in body:
        raise RequestError("'state' is required (any JSON value)")
    questions = questions_of(body, limits.max_questions)
    check_questions(questions, lambda qid, qdef: check_question(qid, qdef, limits))
    return body["state"], questions


def _schema_fragments(questions: dict) -> tuple[list[tuple[str, str | None]], list[Field]]:
    """(text, role) in prompt order, role "question" / "option" marking the spans; and the fields."""
    frags: list[tuple[str, str | None]] = [(SCHEMA_HEADER, None)]
    fields = []
    for index, (qid, qdef) in enumerate(questions.items()):
        t, crit = qdef["type"], qdef.get("criteria")
        frags.append(("\nFIELD %d\nID: %s\nTYPE: %s\nINSTRUCTION: " % (index + 1, qid, t), None))
        frags.append((instructions_text(qid, qdef), "question"))
        frags.append(("\nALLOWED OPTIONS:\n", None))
        options = question_options(t, crit)
        for j, (option_id, description) in enumerate(options):
            semantics = {"option_id": option_id}
            if description is not None:
                semantics["description"] = description
            frags += [("OPTION %d: " % (j + 1), None), (render(semantics), "option"), ("\n", None)]
        frags.append(("END FIELD\n", None))
        fields.append(
            Field(
                str(qid), t, tuple(k for k, _ in options), request_keys(t, crit), tuple(crit) if t == "score" else None
            )
        )
    return frags, fields


_LONGEST_TOKEN: dict[int, tuple[object, int]] = {}


def _surely_over(tok: TokenizerHandle, text: str, limit: int) -> bool:
    """True when `text` cannot fit in `limit` tokens however it splits: no token covers more bytes
    than the longest vocabulary entry. Spares tokenizing megabytes (seconds) only to refuse them."""
    if len(text) <= limit:  # short: tokenizing is cheap, the exact count decides
        return False
    entry = _LONGEST_TOKEN.get(id(tok.tokenizer))
    if entry is None or entry[0] is not tok.tokenizer:
        longest = max(len(t.encode("utf-8")) for t in tok.tokenizer.get_vocab(with_added_tokens=True))
        entry = _LONGEST_TOKEN[id(tok.tokenizer)] = (tok.tokenizer, max(1, longest))
    normalizer = tok.tokenizer.normalizer
    size = len((normalizer.normalize_str(text) if normalizer else text).encode("utf-8", "surrogatepass"))
    return size > limit * entry[1]


def encode_record(tok: TokenizerHandle, state: Any, questions: dict, limits: ClefLimits) -> Record:
    """Upstream `encode_record` on validated input; the state is cut to fit, and the cut reported."""
    # Every fragment is at least one token: refuse a hopeless schema before tokenizing it.
    floor = 1 + sum(4 + 3 * len(question_options(q["type"], q.get("criteria"))) for q in questions.values())
    if floor > limits.max_length:
        raise InputTooLong(
            "the questions alone take at least %d tokens; this model takes at most %d in all"
            % (floor, limits.max_length)
        )
    frags, fields = _schema_fragments(questions)
    # Each fragment is encoded on its own (joining them would change the ids). The prompt's fixed
    # text and recurring questions and options come from the tokenizer's shared cache; the rest
    # are encoded in one call.
    enc = tok.encode_shared_many([PREFIX, SUFFIX] + [text for text, _ in frags])
    schema: list[int] = []
    q_spans, o_spans, o_question = [], [], []
    for text, role in frags:
        start = len(schema)
        schema += enc[text]
        if role == "question":
            q_spans.append((start, len(schema)))
        elif role == "option":
            o_spans.append((start, len(schema)))
            o_question.append(len(q_spans) - 1)
    prefix, suffix = list(enc[PREFIX]), list(enc[SUFFIX])
    fixed = len(prefix) + len(schema) + len(suffix)
    if fixed > limits.max_length:
        raise InputTooLong(
            "the questions alone take %d tokens; this model takes at most %d in all" % (fixed, limits.max_length)
        )
    text = render(state)
    if _surely_over(tok, text, limits.max_state_tokens):
        raise InputTooLong("the state is over %d tokens, the most this model takes" % limits.max_state_tokens)
    state_ids = tok.encode(text)
    if len(state_ids) > limits.max_state_tokens:
        raise InputTooLong(
            "the state is %d tokens; this model takes at most %d" % (len(state_ids), limits.max_state_tokens)
        )
    kept = state_ids[: limits.max_length - fixed]
    offset = len(prefix) + len(kept)
    ids = np.asarray(prefix + kept + schema + suffix, dtype=np.int64)
    spans = lambda s: np.asarray(s, dtype=np.int64).reshape(-1, 2) + offset  # noqa: E731
    return Record(
        input_ids=ids,
        question_spans=spans(q_spans),
        question_types=np.asarray([QTYPES[f.type] for f in fields], dtype=np.int64),
        option_spans=spans(o_spans),
        option_question=np.asarray(o_question, dtype=np.int64),
        fields=fields,
        state_tokens=len(state_ids),
        state_tokens_kept=len(kept),
    )


def head_ids(tok: TokenizerHandle) -> list[int]:
    """The ids every record starts with (its system turn and `STATE:` line, encoded as their own
    fragment): what an export bakes into its graph (models/qwen35/prefix.py)."""
    return tok.encode(PREFIX)


def prepare_record(body: Mapping[str, Any], tok: TokenizerHandle, limits: ClefLimits | None = None) -> Record:
    """Validate the whole request, then encode it. Raises before any forward pass."""
    limits = limits or ClefLimits()
    state, questions = validate(body, limits)
    return encode_record(tok, state, questions, limits)


__all__ = [
    "ClefLimits",
    "Field",
    "Record",
    "QTYPES",
    "render",
    "question_options",
    "validate",
    "encode_record",
    "head_ids",
    "prepare_record",
]
