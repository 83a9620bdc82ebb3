"""Cua-S1 finishing: letter logits -> option probabilities -> Jev choice answers -> response.

Public:
    round_bf16(x) -> float32 ndarray
    letter_logits(hidden [n,H], letter_rows [26,H]) -> float32 [n,26]
    probabilities(logits_row, bf16=True) -> float32 [n_options]
    entropy_confidence(p) -> float
    answer(question, p) -> dict
    decode(questions, logits [n,26], bf16=True) -> {qid: answer}
    reference_response(answers, usage) -> dict          # model = IDENTITY (§3.3)
    jev_response(model, answers, usage) -> dict
    finish(context, logits, profile="reference", model_name=MODEL_NAME, bf16=True) -> dict
    finish_hidden(context, hidden, letter_rows, profile=..., model_name=..., bf16=True) -> dict

The readout (models.md §3.3), per question with n options, on row i of `[n_questions, 26]`
letter logits (letters A..Z = token ids 32..57; a row uses only its first n):

1. **Logits.** Either the graph's letter logits, or `finish_hidden`, which computes them on the
   host as the native worker does: the final-norm hidden state at the last real position times
   the 26 letter rows of the (tied) embedding, each product accumulated in float64 and rounded
   once to float32. Prefer the hidden-state path when the graph can give `h_last`: it is the
   native worker's arithmetic exactly, where an in-graph f32 matmul differs in the last bits.
2. **BF16 rounding** (`bf16=True`, the default): the reference (transformers + PEFT) takes the
   logits out of `lm_head` in BF16, so rounding our f32 logits to BF16 first tracks it best.
   `bf16=False` is the native worker's readout (no rounding), which the stable-softmax check
   [1000, 1001] is stated on (BF16 would make it [1000, 1000]). A served float32 export reads
   out unrounded, as the float32 reference does; half-precision exports round.
3. **Softmax** in float64 over the n letters, max-subtracted, summed left to right; the
   probabilities are then rounded to float32, as the native worker returns them. No temperature.
4. **Answer.** `choice` = first argmax (ties go to the earliest option); `probabilities` in
   request order, unrounded (the float32 values as JSON doubles); `confidence` =
   max(0, 1 − H/ln n) over the float32 probabilities in float64, skipping p = 0; 1 when n = 1.
"""

from __future__ import annotations

import math

import numpy as np

from models.confidence import jev_choice as jev_confidence
from models.cua_s1.identity import IDENTITY, LETTERS, MODEL_NAME
from models.cua_s1.prepare import Context, Question
from models.errors import InferenceFailed


def round_bf16(x) -> np.ndarray:
    """Round float32 values to the nearest BF16 (ties to even), kept as float32.

    Same as torch's `.to(torch.bfloat16).float()` for finite values; overflow becomes ±inf.
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = bits.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, out)


def letter_logits(hidden, letter_rows) -> np.ndarray:
    """`hidden [n,H] · letter_rows[26,H]ᵀ` with float64 accumulation, rounded once to float32.

    `letter_rows` are float32 values; the server passes them already widened to float64 (the
    4B's 26 × 2560 rows widened per request would cost more than the product).

    The products of float32 values are exact in float64; the sum uses BLAS order where the
    native worker sums left to right, which can only differ within ~1e-16 (relative) of a
    float32 rounding boundary.
    """
    h = np.asarray(hidden, dtype=np.float32).astype(np.float64)
    w = (
        letter_rows
        if getattr(letter_rows, "dtype", None) == np.float64
        else np.asarray(letter_rows, dtype=np.float32).astype(np.float64)
    )
    if h.ndim != 2 or w.ndim != 2 or h.shape[1] != w.shape[1]:
        raise InferenceFailed("hidden %s and letter rows %s do not match" % (h.shape, w.shape))
    with np.errstate(over="ignore", invalid="ignore"):
        return (h @ w.T).astype(np.float32)


def probabilities(logits, bf16: bool = True) -> np.ndarray:
    """Float32 option probabilities from one question's n letter logits (steps 2–3 above)."""
    row = np.asarray(logits, dtype=np.float32)
    if bf16:
        row = round_bf16(row)
    if not np.isfinite(row).all():
        raise InferenceFailed("non-finite letter logits")
    z = row.astype(np.float64)
    e = np.exp(z - z.max())
    total = 0.0
    for v in e:  # left to right, as the native worker sums
        total += float(v)
    p = (e / total).astype(np.float32)
    if not np.isfinite(p).all():
        raise InferenceFailed("non-finite probabilities")
    return p


def entropy_confidence(p) -> float:
    """max(0, 1 − H/ln n), H = −Σ p·ln p over p > 0; 1 when n = 1 (upstream's p_max is dropped)."""
    values = [float(v) for v in p]
    n = len(values)
    if n == 1:
        return 1.0
    entropy = -sum(v * math.log(v) for v in values if v > 0)
    return max(0.0, 1.0 - entropy / math.log(n))


def answer(question: Question, p) -> dict:
    values = [float(v) for v in p]
    best = max(range(len(values)), key=values.__getitem__)  # the first maximum
    return {
        "type": "choice",
        "choice": question.keys[best],
        "probabilities": dict(zip(question.keys, values, strict=True)),
        "confidence": entropy_confidence(values),
    }


def decode(questions: list[Question], logits, bf16: bool = True) -> dict:
    """Answers in request order from `[n_questions, >= n_options]` letter logits."""
    logits = np.asarray(logits)
    if logits.ndim != 2 or logits.shape[0] != len(questions) or logits.shape[1] < len(LETTERS):
        raise InferenceFailed(
            "expected letter logits [%d, %d], got %s" % (len(questions), len(LETTERS), list(logits.shape))
        )
    answers = {}
    for row, q in zip(logits, questions, strict=True):
        try:
            p = probabilities(row[: len(q.keys)], bf16=bf16)
        except InferenceFailed as exc:
            raise InferenceFailed("question %r: %s" % (q.qid, exc)) from None
        answers[q.qid] = answer(q, p)
    return answers


def reference_response(answers: dict, usage: dict) -> dict:
    """What upstream's worker returns: the identity as `model`, Jev choice answers, usage."""
    return {"model": IDENTITY, "answers": answers, "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 0}}


def jev_response(model: str, answers: dict, usage: dict) -> dict:
    """The hosted-Jev core: Jev's confidence; the entropy one and the identity move to `x_`."""
    out = {}
    for qid, a in answers.items():
        out[qid] = {
            "type": "choice",
            "choice": a["choice"],
            "probabilities": a["probabilities"],
            "confidence": jev_confidence(a["probabilities"].values()),
            "x_confidence": a["confidence"],
        }
    return {
        "model": model,
        "answers": out,
        "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 0},
        "x_model": IDENTITY,
    }


def finish(
    context: Context, logits, profile: str = "reference", model_name: str = MODEL_NAME, bf16: bool = True
) -> dict:
    """The response for one request from its `[n_questions, 26]` letter logits."""
    answers = decode(context.questions, logits, bf16=bf16)
    if profile == "jev":
        return jev_response(model_name, answers, context.usage)
    return reference_response(answers, context.usage)


def finish_hidden(
    context: Context, hidden, letter_rows, profile: str = "reference", model_name: str = MODEL_NAME, bf16: bool = True
) -> dict:
    """`finish` from the last-position hidden states `[n_questions, H]` and the letter rows `[26, H]`."""
    return finish(context, letter_logits(hidden, letter_rows), profile, model_name, bf16)


__all__ = [
    "round_bf16",
    "letter_logits",
    "probabilities",
    "entropy_confidence",
    "answer",
    "decode",
    "reference_response",
    "jev_confidence",
    "jev_response",
    "finish",
    "finish_hidden",
]
