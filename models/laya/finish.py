"""Laya finishing: temperature per option-count bucket, softmax per question, typed answers.

A port of laya 0.4.15's `_decode_answers` (models.md §2.6) in float32 numpy, plus the two
response profiles: `reference` (what laya.serve returns, with `x_jev_confidence` and the
Router's `routing`) and `jev` (the hosted-Jev core, extras prefixed `x_`).
"""
from __future__ import annotations

import math

import numpy as np

from models.errors import InferenceFailed
from models.laya.checkpoint import QTYPES, temp_bucket
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
    """Jev's choice / score confidence from an answer's (rounded) probabilities (laya #302)."""
    p = [float(v) for v in probabilities]
    if kind not in ("choice", "score") or not p or not all(math.isfinite(v) and v >= 0 for v in p):
        return None
    n = len(p)
    if n == 1:
        return 1.0
    total = sum(p)
    p = [v / total for v in p] if total else [1.0 / n] * n
    if kind == "choice":
        return (max(p) - 1.0 / n) / (1.0 - 1.0 / n)
    mode = max(range(n), key=p.__getitem__)
    spread = sum(v * abs(i - mode) for i, v in enumerate(p))
    center = (n - 1) / 2
    return max(0.0, 1.0 - spread / (sum(abs(i - center) for i in range(n)) / n))


def decode(questions: list[Question], logits: np.ndarray, act_p: np.ndarray, calib: dict) -> dict:
    """Typed answers in request order from per-row option logits and act probabilities."""
    answers = {}
    temperature, by_options = calib["temperature"], calib["temperature_by_options"]
    for r, q in enumerate(questions):
        k = len(q.keys) if q.t == "choice" else (len(q.crit) if q.t == "score" else 2)
        row = np.asarray(logits[r, :k], dtype=np.float32)
        act = float(act_p[r, 0])
        # math over the few floats: numpy's isfinite().all() costs more than it checks here.
        if not all(map(math.isfinite, row.tolist())) or not all(map(math.isfinite, act_p[r].tolist())):
            raise InferenceFailed("non-finite model output for question %r" % q.qid)
        qt = QTYPES[q.t]
        p = softmax_row(row, by_options.get(temp_bucket(qt, k), temperature[qt]))
        if q.option_order is not None and len(q.option_order) == len(p):
            canonical = np.empty_like(p)
            canonical[np.asarray(q.option_order, dtype=int)] = p
            p = canonical
        # Python floats of the float32 values (what float(p[i]) gives), read once.
        probs = p.tolist()
        top = max(probs[:k])
        ans_conf = round(0.0 if top < 0.0 else (1.0 if top > 1.0 else top), 4)
        action = {"act_probability": round(act, 4)}
        if q.t == "choice":
            answers[q.qid] = {
                "type": "choice", "choice": q.keys[int(p.argmax())],
                "probabilities": {json_key(kk): round(v, 4) for kk, v in zip(q.keys, probs)},
                "confidence": round(entropy_confidence(p, k), 4),
                "answer_confidence": ans_conf, "action": action}
        elif q.t == "score":
            answers[q.qid] = {
                "type": "score", "score": round(float((np.arange(k) * p).sum()), 4),
                "legend": {str(i): render_criterion(c) for i, c in enumerate(q.crit)},
                "probabilities": {str(i): round(v, 4) for i, v in enumerate(probs)},
                "confidence": round(entropy_confidence(p, k), 4),
                "answer_confidence": ans_conf, "action": action}
        else:
            p1 = probs[1]
            answers[q.qid] = {
                "type": "noul", "noul": round(p1, 4), "confidence": round(max(p1, 1.0 - p1), 4),
                "answer_confidence": ans_conf, "action": action}
    return answers


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
        extras = {"x_confidence": a["confidence"], "x_answer_confidence": a["answer_confidence"],
                  "x_action": a["action"]}
        if a["type"] == "noul":
            out[qid] = {"type": "noul", "noul": a["noul"], **extras}
            continue
        probabilities = a["probabilities"]
        core = {"type": a["type"], a["type"]: a[a["type"]], "probabilities": probabilities,
                "confidence": jev_confidence(a["type"], list(probabilities.values()))}
        if a["type"] == "score":
            core["legend"] = a["legend"]
        out[qid] = {**core, **extras}
    core_usage = {"input_tokens": usage["input_tokens"], "output_tokens": 0}
    x_usage = {k: v for k, v in usage.items() if k not in core_usage}
    return {"model": model, "answers": out, "usage": core_usage, "x_usage": x_usage, "x_routing": routing}
