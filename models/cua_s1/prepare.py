"""Cua-S1 preparation: validate the request, render one chat prompt per question, tokenize it.

Public:
    CuaLimits(max_questions=64, max_options=26, max_prompt_tokens=16384, max_body_bytes=4 MiB)
    Question(qid, goal, keys, labels)              # what finishing needs per question
    Context(questions, usage, prompt_tokens)       # Prepared.context
    map_request(body, names=(MODEL_NAME,), limits=CuaLimits()) -> (state_text, [Question])
    prompt_text(state_text, question) -> str       # the byte-exact chat prompt (§3.2)
    prepare_rows(body, tok, limits=CuaLimits(), names=(MODEL_NAME,)) -> ([Question], [[int]], usage)
    prepare(body, tok, limits=CuaLimits(), names=(MODEL_NAME,), baked=0) -> models.base.Prepared

A port of upstream's `models/cua_s1/text/contract.py` (`map_request`, `build_messages`) and the
native worker's `chat_text` (models.md §3.1–3.3). Each question is an independent prompt over the
shared state, so one row (token ids) per question; nothing is truncated, an over-long prompt is
a 413. Unlike upstream, which stops at the first problem, every invalid question is reported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from collections.abc import Mapping, Sequence

from models.base import Prepared
from models.cua_s1.identity import LETTERS, MODEL_NAME
from models.errors import InputTooLong, InvalidQuestions, RequestError, UnknownModel, questions_of
from models.render import json_kind as _kind, render
from models.tokenizer import TokenizerHandle

# The adapter's system prompt, byte for byte as trycua/cua's `libs/cua-s1/python/src/cua_s1/four_b.py`
# at 0e75660c states it (MIT).
SYSTEM_PROMPT = (
    "You are a one-pass computer-use decision model. You are shown the current state of a screen "
    "and a fixed, closed list of candidate (element, action) options, each given a single letter. "
    "Choose exactly one option: the single best next action to take. Answer with ONLY that "
    "option's letter -- no words, no punctuation, no explanation."
)
# The Qwen3.5 chat template around [system, user] with add_generation_prompt=True and *no*
# enable_thinking argument: the prompt ends in an open `<think>\n` (enable_thinking=False would
# close it, which the adapter was not trained on). The template trims message content, which
# never matters here: the user message starts with "Goal: " or "App: " and ends with "letter.".
_CHAT = "<|im_start|>system\n%s<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n<think>\n"
# The same prompt cut at special tokens: a fixed head (the system turn) and tail, which
# TokenizerHandle.encode_framed encodes once.
_HEAD = "<|im_start|>system\n%s<|im_end|>\n<|im_start|>" % SYSTEM_PROMPT
_TAIL = "<|im_end|>\n<|im_start|>assistant\n<think>\n"
_USER = (
    "%sApp: Cua Driver\nTask family: closed-candidate decision\n\nAccessibility tree:\n%s"
    "\n\nOptions:\n%s\n\nAnswer with a single letter."
)


@dataclass
class CuaLimits:
    max_questions: int = 64
    max_options: int = len(LETTERS)  # one letter each: A..Z
    max_prompt_tokens: int = 16_384
    max_body_bytes: int = 4 << 20  # enforced by the server before the body is read


@dataclass(frozen=True)
class Question:
    qid: str
    goal: str  # rendered instructions; "" means no Goal line
    keys: tuple[str, ...]  # answer keys, request order (option i has letter LETTERS[i])
    labels: tuple[str, ...]  # escaped option labels, as they appear in the prompt


@dataclass
class Context:
    questions: list[Question]
    usage: dict
    prompt_tokens: list[int]  # per question, request order


def _text(value: Any) -> str | None:
    """A string as is; an object or array as `json.dumps(v, ensure_ascii=False)`; else None."""
    return render(value) if isinstance(value, (str, dict, list)) else None


def _escape(label: str) -> str:
    """Upstream's chooser quotes each label as a JSON string and drops the quotes."""
    return json.dumps(label, ensure_ascii=False)[1:-1]


def check_model(model: Any, names: Sequence[str]) -> None:
    """Upstream takes only `cua-s1-4b-0.2`; here the server's registry has already routed the
    request, so an absent model (one model loaded), an alias or `jev-latest` also pass."""
    if model is None:
        return
    accepted = {n.lower() for n in names} | {"jev-latest"}
    if not isinstance(model, str) or model.strip().lower() not in accepted:
        raise UnknownModel("'model' must be %r, got %r" % (names[0] if names else MODEL_NAME, model))


def map_question(qid: str, qdef: Any, limits: CuaLimits) -> Question | str:
    """The mapped question, or the first problem with it (a string)."""
    if not isinstance(qdef, dict):
        return "a question must be an object, got %s" % _kind(qdef)
    t = qdef.get("type")
    if t in ("score", "noul"):
        # The adapter was trained on closed-option choices only.
        return "type %r is not supported" % t
    if t != "choice":
        return "unknown type %r; this model answers 'choice' questions" % (t,)
    if "instructions" not in qdef:
        return "'instructions' is required (null means no goal)"
    ins = qdef["instructions"]
    goal = "" if ins is None else _text(ins)
    if goal is None:
        return "'instructions' must be a string, an object, an array or null, got %s" % _kind(ins)
    criteria = qdef.get("criteria")
    if not isinstance(criteria, dict) or not 1 <= len(criteria) <= limits.max_options:
        got = ("%d options" % len(criteria)) if isinstance(criteria, dict) else _kind(criteria)
        return "'criteria' must be an object with 1 to %d options, got %s" % (limits.max_options, got)
    labels = []
    for key, value in criteria.items():
        label = key if value is None else _text(value)
        if label is None:
            return "option %r: a criteria value must be a string, an object, an array or null, got %s" % (
                key,
                _kind(value),
            )
        labels.append(_escape(label))
    return Question(qid, goal, tuple(criteria), tuple(labels))


def map_request(
    body: Mapping[str, Any], names: Sequence[str] = (MODEL_NAME,), limits: CuaLimits | None = None
) -> tuple[str, list[Question]]:
    """Validate the whole request (§3.1); returns the rendered state and the questions in order."""
    limits = limits or CuaLimits()
    if not isinstance(body, Mapping):
        raise RequestError("the request body must be a JSON object")
    check_model(body.get("model"), names)
    state = body.get("state")
    if isinstance(state, (str, dict, list)) and not state:
        raise RequestError("'state' must not be empty")
    text = _text(state)
    if text is None:
        raise RequestError("'state' must be a string, an object or an array, got %s" % _kind(state))
    questions = questions_of(body, limits.max_questions)
    mapped, errors = [], []
    for qid, qdef in questions.items():
        q = map_question(qid, qdef, limits)
        if isinstance(q, str):
            errors.append({"question": qid, "detail": q})
        else:
            mapped.append(q)
    if errors:
        raise InvalidQuestions(
            "; ".join("question %r: %s" % (e["question"], e["detail"]) for e in errors), errors=errors
        )
    return text, mapped


def user_text(state: str, question: Question) -> str:
    goal = "Goal: %s\n\n" % question.goal if question.goal else ""
    options = "\n".join(
        '%s. Decision "%s" -> select' % (letter, label) for letter, label in zip(LETTERS, question.labels, strict=False)
    )  # a letter each
    return _USER % (goal, state, options)


def prompt_text(state: str, question: Question) -> str:
    """The whole prompt, byte for byte (§3.2): tokenized as one string, special-token text included."""
    return _CHAT % (SYSTEM_PROMPT, user_text(state, question))


def head_ids(tok: TokenizerHandle) -> list[int]:
    """The ids every prompt starts with (the system turn up to the user turn's `<|im_start|>`):
    what an export bakes into its graph (models/qwen35/prefix.py). encode_framed encodes `_HEAD`
    on its own, so each row starts with exactly these."""
    return tok.encode(_HEAD)


def prepare_rows(
    body: Mapping[str, Any], tok: TokenizerHandle, limits: CuaLimits | None = None, names: Sequence[str] = (MODEL_NAME,)
) -> tuple[list[Question], list[list[int]], dict]:
    """Validate, render and tokenize every question; raises before any forward pass."""
    limits = limits or CuaLimits()
    state, questions = map_request(body, names, limits)
    # The ids of the whole prompt string: pieces cut anywhere but at special tokens could merge
    # differently at their seams (encode_framed checks its cuts).
    rows = tok.encode_framed(_HEAD, ["user\n" + user_text(state, q) for q in questions], _TAIL)
    over = [
        {"question": q.qid, "detail": "%d prompt tokens, over %d" % (len(r), limits.max_prompt_tokens)}
        for q, r in zip(questions, rows, strict=True)
        if len(r) > limits.max_prompt_tokens
    ]
    if over:
        raise InputTooLong("; ".join("question %r: %s" % (e["question"], e["detail"]) for e in over), errors=over)
    usage = {"input_tokens": sum(len(r) for r in rows), "output_tokens": 0}
    return questions, rows, usage


def prepare(
    body: Mapping[str, Any],
    tok: TokenizerHandle,
    limits: CuaLimits | None = None,
    names: Sequence[str] = (MODEL_NAME,),
    baked: int = 0,
) -> Prepared:
    """`prepare_rows` as the runtime's `Prepared`: work = rows, context = `Context`. `baked`: the
    length of a prompt head the graph has baked in, which the graph does not run (`longest`
    counts what it runs; usage counts the whole prompt)."""
    questions, rows, usage = prepare_rows(body, tok, limits, names)
    lengths = [len(r) for r in rows]
    return Prepared(
        rows=len(rows),
        tokens=usage["input_tokens"],
        longest=max(lengths) - baked,
        work=rows,
        context=Context(questions, usage, lengths),
        questions=len(questions),
    )


__all__ = [
    "CuaLimits",
    "Question",
    "Context",
    "SYSTEM_PROMPT",
    "check_model",
    "map_request",
    "head_ids",
    "prompt_text",
    "prepare_rows",
    "prepare",
]
