"""Open-Jev finishing: the scalar head on the host, per-question calibration, typed answers and
the envelope (models.md §4.3-4.4), as system1-omni's native worker computes them.

    finish(context, hidden, *, inference_seconds=None, model=None, profile="reference") -> dict
        context  prepare.Context of the request
        hidden   float32 [n_candidates, H]: the final-norm hidden state of each candidate's last
                 real token, rows in prepare's order
    finish_scores(context, scores, ...) -> dict      the same, from head scores already computed
    head_scores(hidden, weight, bias) -> float32 [n]
    calibrate(logits, temperature) -> list[float]
    answer(question, probabilities) -> dict

Pure functions of their arguments (the clock aside), so a served model can call them from any
thread. Non-finite scores raise InferenceFailed (500 inference_failed).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np

from models.confidence import jev_choice, jev_score
from models.errors import InferenceFailed
from models.open_jev.prepare import Context, Question

METHOD = "native_merged_lora_decision_head"
_HEAD_CHUNK_VALUES = 1 << 22  # float64 products held at once while scoring


def head_scores(hidden: np.ndarray, weight: np.ndarray, bias: float) -> np.ndarray:
    """score = float32(Σ_i float64(w_i)·float64(h_i)) + bias, the bias added in float32.

    The products are exact in float64; the sum runs left to right (a cumulative sum), the order
    the native worker's iterator sum uses, so the float32 result is bit-identical to it.
    """
    h = np.asarray(hidden, dtype=np.float32)
    w = np.asarray(weight, dtype=np.float32).astype(np.float64)
    if h.ndim != 2 or h.shape[1] != w.shape[0] or w.shape[0] == 0:
        raise InferenceFailed("hidden states of shape %s do not fit a head of width %d" % (tuple(h.shape), w.shape[0]))
    out = np.empty(h.shape[0], dtype=np.float32)
    step = max(1, _HEAD_CHUNK_VALUES // w.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, h.shape[0], step):
            sums = np.cumsum(h[start : start + step].astype(np.float64) * w, axis=1)[:, -1]
            out[start : start + step] = sums.astype(np.float32) + np.float32(bias)
    return out


def calibrate(logits: Sequence[float], temperature: float) -> list[float]:
    """p_i = exp((l_i − m)/T) / Σ in float64, m the max of the float32 logits, summed in order."""
    values = [float(np.float32(v)) for v in logits]
    m = max(values)
    exps = [math.exp((v - m) / temperature) for v in values]
    total = 0.0
    for e in exps:
        total += e
    return [e / total for e in exps]


def _mode(p: list[float]) -> int:
    """First maximum wins ties."""
    best = 0
    for i in range(1, len(p)):
        if p[i] > p[best]:
            best = i
    return best


def answer(question: Question, p: list[float]) -> dict:
    """The typed answer with Jev's confidences; probabilities unrounded, in request order."""
    if question.kind == "noul":
        return {"type": "noul", "noul": p[1]}
    mode = _mode(p)
    probabilities = dict(zip(question.keys, p, strict=True))
    if question.kind == "choice":
        return {
            "type": "choice",
            "choice": question.keys[mode],
            "probabilities": probabilities,
            "confidence": jev_choice(p),
        }
    return {
        "type": "score",
        "score": sum(i * v for i, v in enumerate(p)),
        "probabilities": probabilities,
        "confidence": jev_score(p),
        "legend": question.legend,
    }


def question_logits(context: Context, scores: np.ndarray) -> list[list[float]]:
    """Scores regrouped per question; a noul gains its fixed false logit: [0.0, score]."""
    if len(scores) != context.candidates:
        raise InferenceFailed("expected %d candidate scores, got %d" % (context.candidates, len(scores)))
    rows, at = [], 0
    for q in context.questions:
        row = [float(s) for s in scores[at : at + q.candidates]]
        at += q.candidates
        bad = [i for i, v in enumerate(row) if not math.isfinite(v)]
        if bad:
            raise InferenceFailed("non-finite decision score for question %r, candidate %d" % (q.qid, bad[0]))
        rows.append([0.0, row[0]] if q.kind == "noul" else row)
    return rows


def finish_scores(
    context: Context,
    scores: np.ndarray,
    *,
    inference_seconds: float | None = None,
    model: str | None = None,
    profile: str = "reference",
) -> dict:
    export = context.export
    answers = {
        q.qid: answer(q, calibrate(row, export.temperature))
        for q, row in zip(context.questions, question_logits(context, scores), strict=True)
    }
    if inference_seconds is None:
        inference_seconds = time.perf_counter() - context.started
    metadata = {
        "method": METHOD,
        "temperature": export.temperature,
        "candidate_sequences": context.candidates,
        "inference_seconds": inference_seconds,
        "base_revision": export.base_revision,
        "max_length": export.max_length,
        "prefix_cache": {"enabled": False, "mode": "independent_candidates"},
    }
    usage = {"input_tokens": context.input_tokens, "output_tokens": 0}
    # The answers already are the Jev core (Jev's confidences, no noul confidence); the jev
    # profile only moves the extra `metadata` under an `x_` name.
    extra = "x_metadata" if profile == "jev" else "metadata"
    return {"model": model or export.model_id, "answers": answers, "usage": usage, extra: metadata}


def finish(
    context: Context,
    hidden: np.ndarray,
    *,
    inference_seconds: float | None = None,
    model: str | None = None,
    profile: str = "reference",
) -> dict:
    """The response body for one request from its candidates' last hidden states."""
    if np.shape(hidden)[0] != context.candidates:
        raise InferenceFailed("expected %d rows of hidden states, got %d" % (context.candidates, np.shape(hidden)[0]))
    scores = head_scores(hidden, context.export.head_weight, context.export.head_bias)
    return finish_scores(context, scores, inference_seconds=inference_seconds, model=model, profile=profile)


__all__ = ["METHOD", "head_scores", "calibrate", "answer", "question_logits", "finish_scores", "finish"]
