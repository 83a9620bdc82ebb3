"""Finishing (models.md §5.4): per-question float32 softmax with no temperature, typed answers,
ties in request order, rounding, usage; against the reference `systemone_answer`."""

from __future__ import annotations

import math

import numpy as np
import pytest

from models.clef_flash.finish import finish, jev_confidence, question_probabilities, softmax
from models.clef_flash.prepare import ClefLimits, prepare_record
from models.errors import InferenceFailed

from .cases import CASES, body


def _logits(rec, seed=0):
    return np.random.default_rng(seed).normal(0, 2, len(rec.option_question)).astype(np.float32)


def test_softmax_is_float32_and_untempered():
    p = softmax(np.array([-2.0, -1.0, 0.0], dtype=np.float32))
    assert p.dtype == np.float32
    e = [math.exp(v) for v in (-2.0, -1.0, 0.0)]
    np.testing.assert_allclose(p, [v / sum(e) for v in e], atol=1e-7)


@pytest.mark.parametrize("name,state,questions", CASES, ids=[c[0] for c in CASES])
def test_answers_match_systemone_answer(name, state, questions, tok, ref):
    import torch

    rec = prepare_record(body(state, questions), tok)
    logits = _logits(rec, seed=len(name))
    out = finish(rec, logits, "clef-flash")
    start = 0
    for field, qdef in zip(rec.fields, questions.values()):
        chunk = torch.from_numpy(logits[start : start + len(field.keys)])
        start += len(field.keys)
        want = ref.systemone_answer(qdef, dict(zip(field.keys, chunk.float().softmax(-1).tolist())))
        assert out["answers"][field.qid] == want
        assert list(out["answers"][field.qid]) == list(want)  # key order too
    assert list(out["answers"]) == list(questions)


def test_shapes_of_each_type(tok):
    questions = {
        "c": {"type": "choice", "criteria": {"zeta": "z", "alpha": None}},
        "s": {"type": "score", "criteria": ["lo", {"mid": 1}, None]},
        "n": {"type": "noul", "criteria": {"true": "yes"}},
    }
    rec = prepare_record(body("x", questions), tok)
    # Upstream order: c = [alpha, zeta], s = [0, 1, 2], n = [true, false].
    logits = np.array([0.0, math.log(3.0), 0.0, 0.0, math.log(2.0), math.log(4.0), 0.0], dtype=np.float32)
    out = finish(rec, logits, "my-alias")
    assert out["model"] == "my-alias"
    assert out["usage"] == {"input_tokens": rec.tokens, "output_tokens": 0}
    c, s, n = (out["answers"][k] for k in "csn")
    assert c == {"type": "choice", "choice": "zeta", "confidence": 0.75, "probabilities": {"zeta": 0.75, "alpha": 0.25}}
    assert s == {
        "type": "score",
        "score": 1.25,
        "confidence": 0.5,
        "legend": {"0": "lo", "1": {"mid": 1}, "2": None},
        "probabilities": {"0": 0.25, "1": 0.25, "2": 0.5},
    }
    assert n == {"type": "noul", "noul": 0.8}
    assert "confidence" not in n


def test_ties_go_to_the_first_key_in_request_order(tok):
    rec = prepare_record(
        body("x", {"c": {"type": "choice", "criteria": {"zeta": None, "mid": None, "alpha": None}}}), tok
    )
    assert rec.fields[0].keys == ("alpha", "mid", "zeta")
    out = finish(rec, np.zeros(3, dtype=np.float32), "m")["answers"]["c"]
    assert out["choice"] == "zeta" and list(out["probabilities"]) == ["zeta", "mid", "alpha"]
    assert out["confidence"] == 0.3333
    # A tie between the last two in request order: the earlier one (mid) wins.
    out = finish(rec, np.array([1.0, 1.0, 0.0], dtype=np.float32), "m")["answers"]["c"]
    assert out["choice"] == "mid"


def test_each_question_is_softmaxed_over_its_own_options(tok):
    rec = prepare_record(body("x", {"a": {"type": "noul"}, "b": {"type": "noul"}}), tok)
    first = question_probabilities(rec, np.array([1.0, 0.0, 5.0, -5.0], dtype=np.float32))
    second = question_probabilities(rec, np.array([1.0, 0.0, -7.0, 9.0], dtype=np.float32))
    assert first[0] == second[0]
    assert all(math.isclose(sum(p.values()), 1.0, abs_tol=1e-6) for p in first)


def test_rounding_is_pythons(tok):
    rec = prepare_record(body("x", {"n": {"type": "noul"}}), tok)
    logits = np.array([0.123456, -0.654321], dtype=np.float32)
    p_true = question_probabilities(rec, logits)[0]["true"]
    assert finish(rec, logits, "m")["answers"]["n"]["noul"] == round(p_true, 4)


def test_truncation_is_reported_in_usage(tok):
    state = "The customer wrote again about the invoice. " * 30
    full = prepare_record(body(state, {"n": {"type": "noul"}}), tok)
    rec = prepare_record(body(state, {"n": {"type": "noul"}}), tok, ClefLimits(max_length=full.tokens - 5))
    usage = finish(rec, np.zeros(2, dtype=np.float32), "m")["usage"]
    assert usage == {
        "input_tokens": full.tokens - 5,
        "output_tokens": 0,
        "state_tokens": full.state_tokens,
        "state_tokens_dropped": 5,
        "truncated": True,
    }


@pytest.mark.parametrize(
    "bad",
    [
        np.array([0.0, np.nan], dtype=np.float32),
        np.array([np.inf, 0.0], dtype=np.float32),
        np.zeros(3, dtype=np.float32),
        np.zeros((1, 2), dtype=np.float32),
    ],
    ids=["nan", "inf", "too-many", "wrong-rank"],
)
def test_unusable_logits_fail_inference(bad, tok):
    rec = prepare_record(body("x", {"n": {"type": "noul"}}), tok)
    with pytest.raises(InferenceFailed):
        finish(rec, bad, "m")


def test_jev_confidence_golden():
    # Open-Jev's golden fixture (models.md §4.5).
    p3 = [0.21343437444688138, 0.3166841593736535, 0.4698814661794651]
    assert jev_confidence("choice", p3) == pytest.approx(0.20482219926919762, abs=1e-12)
    assert jev_confidence("score", p3) == 0.0
    assert jev_confidence("choice", [1.0]) == 1.0
    assert jev_confidence("choice", [0.5, 0.5]) == 0.0
    assert jev_confidence("score", [0.0, 0.0, 1.0]) == 1.0
    assert jev_confidence("score", [0.0, 1.0, 0.0]) == 1.0


def test_jev_profile(tok):
    state = "The customer wrote again about the invoice. " * 30
    questions = {
        "c": {"type": "choice", "criteria": {"zeta": "z", "alpha": None}},
        "s": {"type": "score", "criteria": ["lo", "mid", "hi"]},
        "n": {"type": "noul"},
    }
    full = prepare_record(body(state, questions), tok)
    rec = prepare_record(body(state, questions), tok, ClefLimits(max_length=full.tokens - 3))
    logits = np.array([0.0, math.log(3.0), 0.0, 0.0, math.log(2.0), 1.0, 0.0], dtype=np.float32)
    ref_body = finish(rec, logits, "m")
    jev = finish(rec, logits, "m", profile="jev")
    assert jev["usage"] == {"input_tokens": rec.tokens, "output_tokens": 0}
    assert jev["x_usage"] == {"state_tokens": full.state_tokens, "state_tokens_dropped": 3, "truncated": True}
    c, s, n = (jev["answers"][k] for k in "csn")
    assert c == {
        "type": "choice",
        "choice": "zeta",
        "probabilities": {"zeta": 0.75, "alpha": 0.25},
        "confidence": 0.5,
        "x_confidence": 0.75,
    }
    assert list(s) == ["type", "score", "probabilities", "confidence", "legend", "x_confidence"]
    assert s["x_confidence"] == ref_body["answers"]["s"]["confidence"] == 0.5
    assert s["confidence"] == round(max(0.0, 1 - (0.25 * 2 + 0.25 * 1) / (2 / 3)), 4)
    assert n == ref_body["answers"]["n"] and "confidence" not in n
