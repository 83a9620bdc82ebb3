"""Cua-S1 finishing (models.md §1.3, §3.3): BF16 rounding, the f64 softmax, ties, confidence,
the hidden-state readout and the response shape."""

from __future__ import annotations

import math

import numpy as np
import pytest

from models.cua_s1 import finish
from models.cua_s1.checkpoint import IDENTITY
from models.cua_s1.prepare import Question, prepare
from models.errors import InferenceFailed


def q(*keys, qid="q"):
    return Question(qid, "", tuple(keys), tuple(keys))


def logits_for(rows):
    """[n, 26] letter logits; letters past each row's options are NaN: they must never be read."""
    out = np.full((len(rows), 26), np.nan, dtype=np.float32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def test_stable_softmax_on_raw_f32_logits():
    p = finish.probabilities(np.array([1000, 1001], np.float32), bf16=False)
    assert p.dtype == np.float32
    assert [float(v) for v in p] == [0.2689414322376251, 0.7310585975646973]


def test_bf16_rounding_comes_first():
    # 1001 is not a BF16 value: it rounds to 1000 (spacing 4 there), which makes a tie.
    assert finish.round_bf16(np.array([1000, 1001], np.float32)).tolist() == [1000.0, 1000.0]
    assert finish.probabilities(np.array([1000, 1001], np.float32)).tolist() == [0.5, 0.5]
    a = finish.decode([q("x", "y")], logits_for([[1000, 1001]]))["q"]
    assert a["choice"] == "x" and a["confidence"] == 0.0
    b = finish.decode([q("x", "y")], logits_for([[1000, 1001]]), bf16=False)["q"]
    assert b["choice"] == "y"


def test_round_bf16_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    values = np.concatenate(
        [
            rng.normal(0, 10, 5000).astype(np.float32),
            rng.normal(0, 1e30, 100).astype(np.float32),
            np.array(
                [
                    0.0,
                    -0.0,
                    1.0,
                    1 + 2**-8,
                    1 + 3 * 2**-8,
                    -(1 + 2**-8),
                    1e-40,
                    -1e-42,
                    np.finfo(np.float32).max,
                    -np.finfo(np.float32).max,
                    np.inf,
                    -np.inf,
                ],
                np.float32,
            ),
        ]
    )
    expected = torch.from_numpy(values).to(torch.bfloat16).float().numpy()
    got = finish.round_bf16(values)
    assert got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
    assert np.isnan(finish.round_bf16(np.array([np.nan], np.float32))[0])


def test_softmax_is_f64_then_rounded_to_f32():
    row = np.array([0.1, -2.3, 4.75, 4.5], np.float32)
    z = row.astype(np.float64)
    e = np.exp(z - z.max())
    expected = (e / e.sum()).astype(np.float32)
    assert np.array_equal(finish.probabilities(row, bf16=False), expected)
    bf = finish.round_bf16(row).astype(np.float64)
    e = np.exp(bf - bf.max())
    assert np.array_equal(finish.probabilities(row), (e / e.sum()).astype(np.float32))


def test_ties_go_to_the_earliest_option():
    answers = finish.decode(
        [q("a", "b", "c", qid="all"), q("a", "b", "c", qid="late")], logits_for([[0, 0, 0], [-1, 5, 5]])
    )
    assert answers["all"]["choice"] == "a" and answers["late"]["choice"] == "b"
    assert answers["all"]["confidence"] == 0.0  # floored: float noise can put H above ln 3


def test_one_option():
    a = finish.decode([q("only")], logits_for([[-37.5]]))["q"]
    assert a == {"type": "choice", "choice": "only", "probabilities": {"only": 1.0}, "confidence": 1.0}


def test_confidence_formula():
    p = [0.12, 0.88]
    h = -(0.12 * math.log(0.12) + 0.88 * math.log(0.88))
    assert finish.entropy_confidence(p) == pytest.approx(1 - h / math.log(2), abs=1e-15)
    # models.md §3.3's example answer: its probabilities give exactly its confidence.
    assert finish.entropy_confidence([0.0024726232513785362, 0.9975274205207825]) == 0.9750249565060322
    # p = 0 terms are skipped (no log(0)); a certain answer is confidence 1.
    p = finish.probabilities(np.array([0, -200, -300], np.float32))
    assert p.tolist() == [1.0, 0.0, 0.0]
    assert finish.entropy_confidence(p) == 1.0
    three = finish.probabilities(np.array([1, 2, 3], np.float32), bf16=False)
    p64 = [float(v) for v in three]
    assert finish.entropy_confidence(three) == max(0.0, 1 + sum(v * math.log(v) for v in p64) / math.log(3))


def test_answer_shape_and_order():
    keys = ("zeta", "alpha", "mid")
    a = finish.decode([q(*keys)], logits_for([[0.5, 2.0, -1.0]]))["q"]
    assert list(a) == ["type", "choice", "probabilities", "confidence"]
    assert list(a["probabilities"]) == list(keys) and a["choice"] == "alpha"
    p = finish.probabilities(np.array([0.5, 2.0, -1.0], np.float32))
    assert list(a["probabilities"].values()) == [float(v) for v in p]  # unrounded f32 values
    assert all(type(v) is float for v in a["probabilities"].values())


def test_letter_logits_accumulate_in_f64_and_round_once_to_f32():
    # The native worker's head test: f32 accumulation would give 0 for the first dot product.
    rows = np.array([[2**24, 1, -(2**24)], [2**24, 1, 0]], np.float32)
    out = finish.letter_logits(np.ones((1, 3), np.float32), rows)
    assert out.dtype == np.float32 and out.tolist() == [[1.0, 16777216.0]]
    big = finish.letter_logits(np.array([[2.0]], np.float32), np.array([[np.finfo(np.float32).max]], np.float32))
    assert np.isinf(big).all()
    with pytest.raises(InferenceFailed):
        finish.decode([q("a")], np.pad(big, ((0, 0), (0, 25))), bf16=False)


def test_hidden_state_path_equals_the_logits_path(tok):
    rng = np.random.default_rng(1)
    prepared = prepare(
        {
            "state": "S",
            "questions": {
                "one": {"type": "choice", "instructions": None, "criteria": {"a": None, "b": None, "c": None}},
                "two": {"type": "choice", "instructions": "x", "criteria": {"k%d" % i: None for i in range(26)}},
            },
        },
        tok,
    )
    hidden = rng.normal(0, 1, (2, 64)).astype(np.float32)
    letters = rng.normal(0, 0.3, (26, 64)).astype(np.float32)
    logits = finish.letter_logits(hidden, letters)
    expected = np.array([[math.fsum(float(a) * float(b) for a, b in zip(h, w)) for w in letters] for h in hidden])
    assert np.array_equal(logits, expected.astype(np.float32))
    # The server's letter rows, widened to float64 once at load, give the same logits.
    assert np.array_equal(finish.letter_logits(hidden, letters.astype(np.float64)), logits)
    for bf16 in (True, False):
        assert finish.finish_hidden(prepared.context, hidden, letters, bf16=bf16) == finish.finish(
            prepared.context, logits, bf16=bf16
        )


def test_reference_response(tok):
    request = {
        "model": "cua-s1-4b-0.2",
        "state": "Dialog: Delete 3 files permanently? Buttons: Delete, Cancel",
        "questions": {
            "pick": {
                "type": "choice",
                "instructions": "Keep the files.",
                "criteria": {"delete": "Click Delete", "cancel": "Click Cancel"},
            },
            "second": {"type": "choice", "instructions": None, "criteria": {"x": None}},
        },
    }
    prepared = prepare(request, tok)
    out = finish.finish(prepared.context, logits_for([[-3.0, 3.0], [1.0]]))
    assert list(out) == ["model", "answers", "usage"]
    assert out["model"] == IDENTITY == "cua-ai/cua-s1-4b-0.2@16818868b0cc7813808aae4e87b417657046ab79:text"
    assert list(out["answers"]) == ["pick", "second"]
    assert out["answers"]["pick"]["choice"] == "cancel"
    assert out["usage"] == {"input_tokens": prepared.tokens, "output_tokens": 0}


def test_jev_profile(tok):
    prepared = prepare(
        {
            "state": "S",
            "questions": {"q": {"type": "choice", "instructions": None, "criteria": {"a": None, "b": None}}},
        },
        tok,
    )
    out = finish.finish(prepared.context, logits_for([[0.0, 1.0]]), profile="jev", model_name="cua-s1-4b-0.2")
    a = out["answers"]["q"]
    p = list(a["probabilities"].values())
    assert out["model"] == "cua-s1-4b-0.2" and out["x_model"] == IDENTITY
    assert a["confidence"] == (max(p) - 0.5) / 0.5
    assert a["x_confidence"] == finish.entropy_confidence(p)
    assert out["usage"] == {"input_tokens": prepared.tokens, "output_tokens": 0}


def test_bad_outputs_are_inference_failures():
    with pytest.raises(InferenceFailed, match="'q'"):
        finish.decode([q("a", "b")], logits_for([[0.0, np.inf]]))
    with pytest.raises(InferenceFailed):
        finish.decode([q("a", "b")], logits_for([[np.nan, 0.0]]))
    with pytest.raises(InferenceFailed):  # finite in f32, +inf in BF16
        finish.decode([q("a", "b")], logits_for([[0.0, np.finfo(np.float32).max]]))
    with pytest.raises(InferenceFailed):
        finish.decode([q("a"), q("b", qid="r")], logits_for([[0.0]]))
    with pytest.raises(InferenceFailed):
        finish.decode([q("a")], np.zeros((1, 25), np.float32))
