"""Laya finishing: temperature per option-count bucket, softmax per question, typed answers.

A port of laya 0.4.15's `_decode_answers` (models.md §2.6) in float32 numpy, split in two:
`calibrate` (a whole batch at once, on the executor thread) and `answers` (per request), plus the two
response profiles: `reference` (what laya.serve returns, with `x_jev_confidence` and the
Router's `routing`) and `jev` (the hosted-Jev core, extras prefixed `x_`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Sequence

import numpy as np

from models import confidence
from models.errors import InferenceFailed
from models.laya.checkpoint import temp_bucket
from models.laya.prepare import Question, render_criterion
from models.render import json_key


def softmax_row(logits: np.ndarray, temperature: float) -> np.ndarray:
    z = logits / temperature
    p = np.exp(z - z.max())
    p /= p.sum()
    return p


def entropy_confidence(p: np.ndarray, k: int) -> float:
    """1 − H/ln k, clipped to [0, 1]; 1 when k < 2 (laya's `confidence_from_probs`)."""
    if k < 2:
        return 1.0
    pk = p[:k]
    ent = -float((pk * np.log(np.clip(pk, 1e-12, 1.0))).sum())
    score = 1.0 - ent / math.log(k)
    return 0.0 if score < 0.0 else (1.0 if score > 1.0 else score)


def jev_confidence(kind: str, probabilities: list[float]) -> float | None:
    """Jev's choice / score confidence from an answer's (rounded) probabilities, as the laya package
    computes it."""
    p = [float(v) for v in probabilities]
    if kind not in ("choice", "score") or not p or not all(math.isfinite(v) and v >= 0 for v in p):
        return None
    n = len(p)
    total = sum(p)
    return confidence.jev(kind, [v / total for v in p] if total else [1.0 / n] * n)


@dataclass(slots=True)
class Calibrated:
    """One question's numbers after calibration, in the request's option order."""

    probs: list[float]  # the float32 probabilities, as Python floats
    top: int  # index of the most probable option
    confidence: float  # entropy_confidence
    expected: float  # Σ i·p_i (a score question's score)
    act: float  # act probability
    finite: bool  # every logit and act probability finite


def calibrate(
    logits: np.ndarray, act_p: np.ndarray, rows: Sequence[tuple[int, int, list[int] | None]], calib: dict
) -> list[Calibrated]:
    """Temperature softmax, option reorder and confidences for many questions at once.

    `rows[i]` = (option count k, qtype, option_order or None) of logits row i. Rows with the same
    k are computed as one [n, k] float32 matrix: every reduction runs along each row's own k
    values, so a row's numbers are bit for bit those of softmax_row / entropy_confidence on it
    alone (tests/models/laya/test_finish.py), whichever rows share its batch. The executor calls
    this once per batch (LayaAdapter.unpack), so its cost grows with the option counts in a batch,
    not with its rows."""
    temperature, by_options = calib["temperature"], calib["temperature_by_options"]
    groups: dict[int, list[int]] = {}
    for i, (k, _, _) in enumerate(rows):
        groups.setdefault(k, []).append(i)
    act_ok = np.isfinite(act_p).all(axis=1).tolist()
    act_first = act_p[:, 0].tolist()
    with np.errstate(all="ignore"):  # a non-finite row is reported by `answers`, per request
        return _calibrate_groups(logits, rows, groups, act_ok, act_first, temperature, by_options)


_max, _sum = np.maximum.reduce, np.add.reduce  # what .max() / .sum() call, without their wrappers
_ARANGE: dict[int, np.ndarray] = {}


def _calibrate_groups(logits, rows, groups, act_ok, act_first, temperature, by_options) -> list[Calibrated]:
    # Numpy's per-call cost, not arithmetic, dominates a small batch here, so the ops are the
    # ufuncs themselves (not max/sum/clip's Python wrappers around them), p ≤ 1 makes
    # clip(p, 1e-12, 1) a maximum, and the temperature is looked up once per question type.
    out: list[Calibrated | None] = [None] * len(rows)
    for k, idx in groups.items():
        raw = logits[:, :k] if len(idx) == len(rows) else logits[np.asarray(idx), :k]
        if raw.dtype != np.float32:
            raw = raw.astype(np.float32)
        by_type = {}
        for i in idx:
            q = rows[i][1]
            if q not in by_type:
                by_type[q] = by_options.get(temp_bucket(q, k), temperature[q])
        if len(by_type) == 1:
            t = np.float32(next(iter(by_type.values())))
        else:
            t = np.asarray([by_type[rows[i][1]] for i in idx], dtype=np.float32)[:, None]
        z = raw / t
        p = np.exp(z - _max(z, axis=1, keepdims=True))
        p /= _sum(p, axis=1, keepdims=True)
        for j, i in enumerate(idx):
            order = rows[i][2]
            if order is not None:
                canonical = np.empty_like(p[j])
                canonical[np.asarray(order, dtype=int)] = p[j]
                p[j] = canonical
        plogp = _sum(p * np.log(np.maximum(p, 1e-12)), axis=1).tolist()  # -entropy, float32
        ar = _ARANGE.get(k)
        if ar is None:
            ar = _ARANGE[k] = np.arange(k)
        expected = _sum(ar * p, axis=1).tolist()
        top = p.argmax(axis=1).tolist()
        finite = np.isfinite(raw).all(axis=1).tolist()
        probs = p.tolist()
        log_k = math.log(k) if k >= 2 else 1.0
        for j, i in enumerate(idx):
            if k < 2:
                conf = 1.0
            else:
                c = 1.0 - -plogp[j] / log_k  # as entropy_confidence, op for op
                conf = 0.0 if c < 0.0 else (1.0 if c > 1.0 else c)
            out[i] = Calibrated(probs[j], top[j], conf, expected[j], act_first[i], finite[j] and act_ok[i])
    return out  # type: ignore[return-value]


def answers(questions: Sequence[Question], calibrated: Sequence[Calibrated]) -> dict:
    """Typed answers in request order from each question's calibrated numbers."""
    out = {}
    for q, c in zip(questions, calibrated, strict=True):
        if not c.finite:
            raise InferenceFailed("non-finite model output for question %r" % q.qid)
        probs = c.probs
        top = max(probs)
        ans_conf = round(0.0 if top < 0.0 else (1.0 if top > 1.0 else top), 4)
        action = {"act_probability": round(c.act, 4)}
        if q.t == "choice":
            out[q.qid] = {
                "type": "choice",
                "choice": q.keys[c.top],
                "probabilities": {json_key(kk): round(v, 4) for kk, v in zip(q.keys, probs, strict=True)},
                "confidence": round(c.confidence, 4),
                "answer_confidence": ans_conf,
                "action": action,
            }
            if q.rows > 1:
                out[q.qid]["option_rows"] = q.rows
        elif q.t == "score":
            out[q.qid] = {
                "type": "score",
                "score": round(c.expected, 4),
                "legend": {str(i): render_criterion(v) for i, v in enumerate(q.crit)},
                "probabilities": {str(i): round(v, 4) for i, v in enumerate(probs)},
                "confidence": round(c.confidence, 4),
                "answer_confidence": ans_conf,
                "action": action,
            }
        else:
            p1 = probs[1]
            out[q.qid] = {
                "type": "noul",
                "noul": round(p1, 4),
                "confidence": round(max(p1, 1.0 - p1), 4),
                "answer_confidence": ans_conf,
                "action": action,
            }
    return out


def reference_profile(model: str, answers: dict, usage: dict, routing: dict) -> dict:
    """laya.serve's payload: every answer as laya returns it, `x_jev_confidence` on choice/score."""
    out = {}
    for qid, a in answers.items():
        conf = jev_confidence(a["type"], list(a.get("probabilities", {}).values()))
        out[qid] = a if conf is None else {**a, "x_jev_confidence": round(conf, 4)}
    return {"model": model, "answers": out, "usage": usage, "routing": routing}


def jev_profile(model: str, answers: dict, usage: dict, routing: dict) -> dict:
    """The hosted-Jev core with Jev's confidence; Laya's own numbers move to `x_` fields."""
    out = {}
    for qid, a in answers.items():
        extras = {
            "x_confidence": a["confidence"],
            "x_answer_confidence": a["answer_confidence"],
            "x_action": a["action"],
        }
        if "option_rows" in a:  # a choice spread over rows, its logits in one softmax
            extras["x_option_rows"] = a["option_rows"]
        if a["type"] == "noul":
            out[qid] = {"type": "noul", "noul": a["noul"], **extras}
            continue
        probabilities = a["probabilities"]
        core = {
            "type": a["type"],
            a["type"]: a[a["type"]],
            "probabilities": probabilities,
            "confidence": jev_confidence(a["type"], list(probabilities.values())),
        }
        if a["type"] == "score":
            core["legend"] = a["legend"]
        out[qid] = {**core, **extras}
    core_usage = {"input_tokens": usage["input_tokens"], "output_tokens": 0}
    x_usage = {k: v for k, v in usage.items() if k not in core_usage}
    return {"model": model, "answers": out, "usage": core_usage, "x_usage": x_usage, "x_routing": routing}
