"""Laya preparation: validate every question, render, tokenize, build one row per question.

A torch-free port of laya 0.4.15's `Agent._check_question`, `_to_internal`, `build_head`,
`build_sequence` and `_encode_state` (models.md §2.4); the parity tests hold it to identical
token ids against the `laya` package itself.

The `jev` profile accepts two things laya refuses, as the hosted Jev API does: a noul question
without `instructions` (its criteria are its text), and a choice whose option markers one row
cannot hold, spread over several rows of the same question (`Row.span`) whose option logits
finishing puts through one softmax.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from collections.abc import Mapping, Sequence

from models.errors import InvalidQuestions, RequestError, TooLarge, check_questions, questions_of
from models.laya.checkpoint import QTYPES
from models.render import json_kind, render
from models.tokenizer import TokenizerHandle

OPTION_TOKENS = 48  # each option's text is cut to its first 48 tokens
_NOUL_DEFAULT_FALSE = "no, the statement does not hold"
_NOUL_DEFAULT_TRUE = "yes, the statement holds"


@dataclass
class LayaLimits:
    max_questions: int = 64
    max_choice_options: int = 255
    max_score_levels: int = 32
    max_options_total: int = 2048
    max_state_chars: int = 200_000


@dataclass
class Row:
    ids: list[int]
    markers: list[int]
    qtype: int
    order: list[int] | None = None  # the question's option_order (finishing reorders by it)
    span: int = 1  # rows of its question this row starts (a spread choice); 0: a later one


@dataclass
class Question:
    qid: str
    t: str
    ins: str
    crit: Any
    labels: dict | None = None
    option_order: list[int] | None = None
    keys: list = field(default_factory=list)  # choice answer keys, request order
    rows: int = 1  # rows its options are spread over (jev profile)


def render_criterion(value) -> str:
    return render(value, separators=(", ", ": "), default=str)


def _noul_labels(labels) -> tuple[str, str]:
    bad = "noul labels must map exactly 'false' and 'true' to distinct non-empty strings"
    if labels is None:
        return "false", "true"
    if not isinstance(labels, dict) or set(labels) != {"false", "true"}:
        raise ValueError(bad)
    f, t = labels["false"], labels["true"]
    if not isinstance(f, str) or not isinstance(t, str):
        raise ValueError(bad)
    f, t = f.strip(), t.strip()
    if not f or not t or f == t:
        raise ValueError(bad)
    return f, t


def _option_count(qdef: Mapping) -> int:
    if qdef.get("type") == "noul":
        return 2
    crit = qdef.get("criteria")
    return len(crit) if isinstance(crit, (dict, list)) else 0


def check_question(qid: str, qdef: Any, limits: LayaLimits, profile: str = "reference") -> str | None:
    """The first problem with one question (laya's wording), or None when it can be answered."""
    if not isinstance(qid, str) or not qid.strip():
        return "question id must be a non-empty string"
    if not isinstance(qdef, dict):
        return "definition must be an object, got %s" % json_kind(qdef)
    t = qdef.get("type")
    if not isinstance(t, str) or t not in QTYPES:
        return "unknown type %r; use one of %s" % (t, sorted(QTYPES))
    return (
        _instructions_problem(qdef, t, profile)
        or _CRITERIA_PROBLEM[t](qdef.get("criteria"), limits)
        or _options_problem(qdef, t)
    )


def _instructions_problem(qdef: dict, t: str, profile: str) -> str | None:
    if "instructions" not in qdef and not (
        profile == "jev" and t == "noul" and isinstance(qdef.get("criteria"), dict) and qdef["criteria"]
    ):
        return "no 'instructions'; add the text the model should answer"
    ins = qdef.get("instructions", qdef.get("criteria"))
    if ins is None:
        return "'instructions' must not be null"
    if (isinstance(ins, str) and not ins.strip()) or (isinstance(ins, (list, dict)) and not ins):
        return "'instructions' must not be empty"
    if not isinstance(ins, (str, dict, list, int, float)):
        return "'instructions' must be a string, object, array or number"
    return None


def _choice_problem(crit: Any, limits: LayaLimits) -> str | None:
    if not isinstance(crit, (dict, list)):
        return "a choice question takes 'criteria' as an object of label -> description (or null), or a list of labels"
    if not crit:
        return "a choice question needs at least one option"
    if len(crit) > limits.max_choice_options:
        return "a choice question takes at most %d options, got %d" % (limits.max_choice_options, len(crit))
    if isinstance(crit, list):
        seen: dict = {}
        for i, label in enumerate(crit):
            if label is None:
                return "choice label %d is null; a label must be a string, number or boolean" % i
            if not isinstance(label, (str, int, float, bool)):
                return (
                    "choice label %d is %s; a label is option text and answer key, so "
                    "it must be a string, number or boolean" % (i, json_kind(label))
                )
            if label in seen:
                return (
                    "choice label %d (%r) repeats label %d; every option needs its own key "
                    "(1, 1.0 and true are one key)" % (i, label, seen[label])
                )
            seen[label] = i
    return None


def _score_problem(crit: Any, limits: LayaLimits) -> str | None:
    if not isinstance(crit, list):
        return "a score question takes 'criteria' as a list of level descriptions, index 0 first"
    if not crit:
        return "a score question needs at least one level"
    if len(crit) > limits.max_score_levels:
        return "a score question takes at most %d levels, got %d" % (limits.max_score_levels, len(crit))
    if None in crit:
        return "score level %d is null; give every level a description" % crit.index(None)
    return None


def _noul_problem(crit: Any, limits: LayaLimits) -> str | None:
    if crit is not None and not isinstance(crit, dict):
        return "a noul question takes 'criteria' as an object with optional 'true'/'false' descriptions"
    if isinstance(crit, dict):
        keys = {str(k).lower() for k in crit}
        if not keys <= {"true", "false"}:
            return (
                "a noul question takes 'criteria' keyed only 'true'/'false', got %s; use "
                "'labels' to word the answer differently" % sorted(keys)
            )
    return None


_CRITERIA_PROBLEM = {"choice": _choice_problem, "score": _score_problem, "noul": _noul_problem}


def _options_problem(qdef: dict, t: str) -> str | None:
    """`option_order` and `labels`, where given."""
    if "option_order" in qdef:
        order, n = qdef["option_order"], _option_count(qdef)
        if (
            not isinstance(order, list)
            or len(order) != n
            or sorted(i for i in order if isinstance(i, int) and not isinstance(i, bool)) != list(range(n))
        ):
            return "'option_order' must be a permutation of range(%d), got %r" % (n, order)
    if "labels" in qdef:
        if t != "noul":
            return "'labels' is only supported for noul questions"
        try:
            _noul_labels(qdef["labels"])
        except ValueError as exc:
            return str(exc)
    return None


def to_internal(qid: str, qdef: dict) -> Question:
    t = qdef["type"]
    crit = qdef.get("criteria")
    if t == "choice" and isinstance(crit, list):
        crit = {c: None for c in crit}
    elif t == "noul" and isinstance(crit, dict):
        crit = {str(k).lower(): v for k, v in crit.items()}
    ins = qdef.get("instructions", crit)  # without them, a jev-profile noul: its criteria
    q = Question(
        qid,
        t,
        render(ins),
        crit,
        labels=qdef.get("labels"),
        option_order=[int(i) for i in qdef["option_order"]] if "option_order" in qdef else None,
    )
    if t == "choice":
        q.keys = list(crit.keys())
    return q


def render_options(q: Question) -> list[str]:
    """Option texts in option order; noul is always [false, true]."""
    if q.t == "choice":
        return [str(k) if v is None or v == "" else "%s: %s" % (k, render_criterion(v)) for k, v in q.crit.items()]
    if q.t == "score":
        return ["level %d: %s" % (i, render_criterion(c)) for i, c in enumerate(q.crit)]
    crit = q.crit or {}
    false_label, true_label = _noul_labels(q.labels)
    f, t = crit.get("false"), crit.get("true")
    return [
        false_label + ": " + (render_criterion(f) if f not in (None, "") else _NOUL_DEFAULT_FALSE),
        true_label + ": " + (render_criterion(t) if t not in (None, "") else _NOUL_DEFAULT_TRUE),
    ]


def serialize_state(state) -> str:
    return render(state)


class RowBuilder:
    """Builds rows with one tokenizer; question texts and options come from its shared cache."""

    def __init__(self, tok: TokenizerHandle, max_len: int, head_max_len: int):
        self.tok = tok
        self.max_len, self.head_max_len = max_len, head_max_len
        self.mask = tok.special["mask_token"]
        self.cls, self.sep = tok.ids["cls_token"], tok.ids["sep_token"]
        self.mask_id = tok.ids["mask_token"]

    def option_ids(self, q: Question) -> list[list[int]]:
        """Each option's marker and tokens, in option order, in one tokenizer call."""
        texts = [" " + o.replace(self.mask, " ") for o in render_options(q)]
        ids = self.tok.encode_shared_many(texts)
        return [[self.mask_id, *ids[t][:OPTION_TOKENS]] for t in texts]

    def head(
        self, q: Question, part: Sequence[int] | None = None, options: list[list[int]] | None = None
    ) -> tuple[list[int], list[int], dict]:
        """`part`: the positions (in the row order of the question's options) this row holds;
        `options`: its option_ids, where the caller has them."""
        enc = self.tok.encode_shared
        opts = render_options(q) if options is None else None
        n = len(opts) if options is None else len(options)
        order = q.option_order if q.option_order is not None else list(range(n))
        if part is not None:
            order = [order[i] for i in part]
        ins = str(q.ins).replace(self.mask, " ")
        head_ids = enc("%s question: %s" % (q.t, ins))
        if options is None:
            opt_ids = [[self.mask_id, *enc(" " + opts[i].replace(self.mask, " "))[:OPTION_TOKENS]] for i in order]
        else:
            opt_ids = [options[i] for i in order]
        budget = self.head_max_len - sum(len(o) for o in opt_ids)
        per_option = None
        if budget < 16:
            per_option = max(4, (self.head_max_len - 16) // max(1, len(opt_ids)))
            opt_ids = [o[:per_option] for o in opt_ids]
            budget = self.head_max_len - sum(len(o) for o in opt_ids)
        ids = [self.cls, *head_ids[: max(8, budget)], self.sep]
        markers = []
        for o in opt_ids:
            markers.append(len(ids))
            ids.extend(o)
        ids.append(self.sep)
        stats = {
            "options": len(opt_ids),
            "options_distinct": len({tuple(o) for o in opt_ids}),
            "tokens_per_option": per_option,
        }
        return ids, markers, stats

    def row(
        self,
        q: Question,
        state_ids: list[int],
        truncate_left: bool,
        part: Sequence[int] | None = None,
        options: list[list[int]] | None = None,
    ):
        ids, markers, stats = self.head(q, part, options)
        room = max(0, self.max_len - len(ids) - 1)
        st = state_ids[max(0, len(state_ids) - room) :] if truncate_left else state_ids[:room]
        ids = (ids + st + [self.sep])[: self.max_len]
        markers = [m for m in markers if m < self.max_len]
        if len(markers) != stats["options"]:
            raise ValueError(
                "only %d of its %d option markers fit in max_len=%d with head_max_len=%d spent on "
                "the question; use fewer or shorter options"
                % (len(markers), stats["options"], self.max_len, self.head_max_len)
            )
        dropped = len(state_ids) - len(st)
        return Row(ids, markers, QTYPES[q.t], q.option_order), stats, dropped

    def spread(self, q: Question, state_ids: list[int], truncate_left: bool):
        """A choice one row cannot hold, over the fewest rows (each an equal share of its options,
        in row order) that hold their options' markers, each option's text kept distinct unless
        a row keeps every text whole: its rows, the options' stats and the state tokens dropped.
        ValueError if even one option a row does not fit. Rows hold fewer options as they grow in
        number, so the fewest is found by bisection."""
        n = len(q.keys)
        options = self.option_ids(q)

        def build(parts: int):
            bounds = [n * i // parts for i in range(parts + 1)]
            try:
                built = [
                    self.row(q, state_ids, truncate_left, range(bounds[i], bounds[i + 1]), options)
                    for i in range(parts)
                ]
            except ValueError:
                return None
            kept = all(st["options_distinct"] == st["options"] or st["tokens_per_option"] is None for _, st, _ in built)
            return built if kept else None

        low, high, best = 1, n, None  # one row (low) did not hold them
        while high - low > 1:
            middle = (low + high) // 2
            built = build(middle)
            if built is None:
                low = middle
            else:
                high, best = middle, built
        best = best or build(n)
        if best is None:
            raise ValueError("its %d options do not fit the model's window even one to a row" % n)
        rows = [r for r, _, _ in best]
        rows[0].span = len(rows)
        for r in rows[1:]:
            r.span = 0
        stats = {
            "options": n,
            "options_distinct": sum(st["options_distinct"] for _, st, _ in best),
            "tokens_per_option": min(
                (st["tokens_per_option"] for _, st, _ in best if st["tokens_per_option"] is not None), default=None
            ),
        }
        return rows, stats, max(d for _, _, d in best)


def validate_envelope(body: Mapping[str, Any], limits: LayaLimits) -> tuple[Any, dict]:
    """The request-level checks: state and questions present, of the right shape and size."""
    if "state" not in body or body["state"] is None:
        raise RequestError("'state' is required: a string, object or array")
    state = body["state"]
    if not isinstance(state, (str, dict, list)):
        raise RequestError("'state' must be a string, object or array, got %s" % json_kind(state))
    questions = questions_of(body, limits.max_questions)
    return state, questions


@dataclass
class Parsed:
    """A request validated and rendered, waiting for its state's token ids."""

    questions: Mapping[str, Any]
    internal: list[Question]
    text: str  # the state as the tokenizer reads it
    truncate_left: bool
    spread: bool = False  # a choice one row cannot hold is spread over rows (jev profile)


def parse_request(body: Mapping[str, Any], limits: LayaLimits, mask: str, profile: str = "reference") -> Parsed:
    """Every check that needs no tokens, and the state's text; raises before any forward pass."""
    state, questions = validate_envelope(body, limits)
    check_questions(questions, lambda qid, qdef: check_question(qid, qdef, limits, profile))
    total = sum(_option_count(q) for q in questions.values())
    if total > limits.max_options_total:
        raise TooLarge(
            "%d options across questions; this model takes at most %d per request" % (total, limits.max_options_total)
        )
    text = serialize_state(state)
    if len(text) > limits.max_state_chars:
        raise TooLarge("state is %d characters; this model takes at most %d" % (len(text), limits.max_state_chars))
    internal = [to_internal(qid, qdef) for qid, qdef in questions.items()]
    return Parsed(questions, internal, text.replace(mask, " "), isinstance(state, list), profile == "jev")


def build_rows(parsed: Parsed, state_ids: list[int], builder: RowBuilder):
    """The request's rows around its state's ids; raises if a question does not fit."""
    internal, truncate_left = parsed.internal, parsed.truncate_left
    rows, stats, dropped, errors = [], [], [], []
    for q in internal:
        try:
            row, st, d = builder.row(q, state_ids, truncate_left)
            rows.append(row)
        except ValueError as exc:
            if not (parsed.spread and q.t == "choice" and len(q.keys) > 1):
                errors.append({"question": q.qid, "detail": str(exc)})
                continue
            try:
                spread, st, d = builder.spread(q, state_ids, truncate_left)
            except ValueError as again:
                errors.append({"question": q.qid, "detail": str(again)})
                continue
            rows.extend(spread)
            q.rows = len(spread)
        stats.append(st)
        dropped.append(d)
    if errors:
        raise InvalidQuestions(
            "%d of %d questions do not fit the model's window" % (len(errors), len(parsed.questions)), errors=errors
        )
    usage = {
        "input_tokens": sum(len(r.ids) for r in rows),
        "output_tokens": 0,
        "state_tokens": len(state_ids),
        "state_tokens_dropped": max(dropped),
        "truncated": max(dropped) > 0,
        "truncated_questions": [q.qid for q, d in zip(internal, dropped, strict=True) if d > 0],
    }
    collapsed = {
        q.qid: {"total": s["options"], "distinct": s["options_distinct"], "tokens_per_option": s["tokens_per_option"]}
        for q, s in zip(internal, stats, strict=True)
        if s["options_distinct"] < s["options"]
    }
    if collapsed:
        usage["options"] = collapsed
    return internal, rows, usage


def prepare_rows(body: Mapping[str, Any], builder: RowBuilder, limits: LayaLimits, profile: str = "reference"):
    """Validate the whole request, then build its rows. Raises before any forward pass."""
    parsed = parse_request(body, limits, builder.mask, profile)
    return build_rows(parsed, builder.tok.encode(parsed.text), builder)


__all__ = ["LayaLimits", "Row", "Question", "RowBuilder", "Parsed", "parse_request", "build_rows", "prepare_rows"]
