"""Clef-Flash finishing: a plain float32 softmax per question, typed answers, the response body.

A port of `systemone_answer` / `systemone` (joint_schema_model.py, models.md §5.4): no
temperature; choice ties go to the first key in REQUEST order; score = Σ i·p_i; every number
rounded with Python's round(x, 4). Upstream truncates the state silently; here a cut state is
reported in `usage` (`state_tokens`, `state_tokens_dropped`, `truncated`), and only then, so an
uncut request gets upstream's body exactly.

    question_probabilities(record: Record, logits: np.ndarray) -> list[dict[str, float]]
    answer(field: Field, probabilities: dict[str, float]) -> dict
    usage(record: Record) -> dict
    jev_confidence(kind: str, p: list[float]) -> float     models/confidence.py's `jev`
    finish(record: Record, logits: np.ndarray, model: str, profile: str = "reference") -> dict

`profile="jev"` (api.md): the hosted-Jev core with Jev's confidence formulas (§1.3, from the
unrounded probabilities), Clef's own max-p confidence as `x_confidence`, truncation in `x_usage`.

`logits` is the graph's float32 [o] in the record's option order; a wrong size or a non-finite
value raises `InferenceFailed` (500 inference_failed).
"""

from __future__ import annotations

import numpy as np

from models.clef_flash.prepare import Field, Record
from models.confidence import jev as jev_confidence
from models.errors import InferenceFailed


def softmax(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float32)
    p = np.exp(z - z.max())
    return p / p.sum(dtype=np.float32)


def question_probabilities(record: Record, logits: np.ndarray) -> list[dict[str, float]]:
    """{option id: p} per question, softmaxed over that question's own options only."""
    logits = np.asarray(logits)
    if logits.shape != (len(record.option_question),):
        raise InferenceFailed(
            "expected %d option logits, got shape %s" % (len(record.option_question), tuple(logits.shape))
        )
    if not np.isfinite(logits).all():
        raise InferenceFailed("non-finite option logits")
    out, start = [], 0
    for field in record.fields:
        end = start + len(field.keys)
        # Python floats of the float32 values, as upstream's `.tolist()` gives.
        out.append(dict(zip(field.keys, softmax(logits[start:end]).tolist(), strict=True)))
        start = end
    return out


def answer(field: Field, probabilities: dict[str, float]) -> dict:
    """`systemone_answer` for one question."""
    if field.type == "noul":
        return {"type": "noul", "noul": round(probabilities["true"], 4)}
    if field.type == "choice":
        keys = field.request_keys
        choice = max(keys, key=probabilities.__getitem__)  # first maximum, request order
        return {
            "type": "choice",
            "choice": choice,
            "confidence": round(probabilities[choice], 4),
            "probabilities": {k: round(probabilities[k], 4) for k in keys},
        }
    levels = field.request_keys
    # Summed left to right in doubles, as upstream's sum() does.
    return {
        "type": "score",
        "score": round(sum(i * probabilities[level] for i, level in enumerate(levels)), 4),
        "confidence": round(max(probabilities[level] for level in levels), 4),
        "legend": dict(zip(levels, field.legend, strict=True)),
        "probabilities": {level: round(probabilities[level], 4) for level in levels},
    }


def usage(record: Record) -> dict:
    out = {"input_tokens": record.tokens, "output_tokens": 0}
    if record.truncated:
        out.update(state_tokens=record.state_tokens, state_tokens_dropped=record.state_tokens_dropped, truncated=True)
    return out


def _jev_answer(field: Field, probabilities: dict[str, float], a: dict) -> dict:
    if field.type == "noul":
        return a
    p = [probabilities[k] for k in field.request_keys]
    core = {
        "type": a["type"],
        a["type"]: a[a["type"]],
        "probabilities": a["probabilities"],
        "confidence": round(jev_confidence(field.type, p), 4),
    }
    if field.type == "score":
        core["legend"] = a["legend"]
    return {**core, "x_confidence": a["confidence"]}


def finish(record: Record, logits: np.ndarray, model: str, profile: str = "reference") -> dict:
    """The response body: the request's `model` echoed, answers in request order, usage."""
    probabilities = question_probabilities(record, logits)
    answers = {f.qid: answer(f, p) for f, p in zip(record.fields, probabilities, strict=True)}
    if profile != "jev":
        return {"model": model, "answers": answers, "usage": usage(record)}
    body = {
        "model": model,
        "answers": {
            f.qid: _jev_answer(f, p, answers[f.qid]) for f, p in zip(record.fields, probabilities, strict=True)
        },
        "usage": {"input_tokens": record.tokens, "output_tokens": 0},
    }
    extra = {k: v for k, v in usage(record).items() if k not in body["usage"]}
    if extra:
        body["x_usage"] = extra
    return body


__all__ = ["softmax", "question_probabilities", "answer", "usage", "jev_confidence", "finish"]
