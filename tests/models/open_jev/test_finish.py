"""Open-Jev finishing: the head's float64-accumulate / float32-round arithmetic, calibration,
Jev confidences, non-finite and mis-shaped outputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from models.errors import InferenceFailed
from models.open_jev import finish as finishing
from models.open_jev.finish import answer, calibrate, finish, head_scores
from models.open_jev.prepare import Context, compile_request
from tests.models.open_jev.conftest import make_export
from tests.models.open_jev.golden import P3, T27


def f32(values):
    return np.asarray(values, dtype=np.float32)


def test_head_accumulates_in_float64():
    """Upstream's cases (models.md §4.3); float32 accumulation would give 0.25."""
    assert head_scores(f32([[1, 1, 1]]), f32([2**24, 1, -(2**24)]), 0.25).tolist() == [1.25]
    assert float(np.float32(np.float32(2**24) + np.float32(1)) - np.float32(2**24)) + 0.25 == 0.25


def test_head_rounds_to_float32_before_the_bias():
    """16777217 rounds to 2**24 in float32, then + (−2**24) in float32 is exactly 0."""
    scores = head_scores(f32([[1, 1]]), f32([2**24, 1]), -(2.0**24))
    assert scores.dtype == np.float32 and scores.tolist() == [0.0]


def _sequential_reference(hidden, weight, bias):
    out = []
    for row in hidden:
        total = 0.0
        for w, h in zip(weight, row):
            total += float(w) * float(h)
        out.append(float(np.float32(np.float32(total) + np.float32(bias))))
    return out


def test_head_sums_left_to_right(monkeypatch):
    """Bit-identical to a left-to-right float64 loop, also across row chunks."""
    rng = np.random.default_rng(0)
    hidden = (rng.standard_normal((37, 300)) * 10.0 ** rng.integers(-6, 7, (37, 300))).astype(np.float32)
    weight = (rng.standard_normal(300) * 10.0 ** rng.integers(-6, 7, 300)).astype(np.float32)
    bias = float(np.float32(0.3))
    expected = _sequential_reference(hidden, weight, bias)
    assert head_scores(hidden, weight, bias).tolist() == expected
    monkeypatch.setattr(finishing, "_HEAD_CHUNK_VALUES", 900)  # 3 rows per chunk
    assert head_scores(hidden, weight, bias).tolist() == expected


def test_head_shape_mismatch():
    with pytest.raises(InferenceFailed):
        head_scores(f32([[1, 2]]), f32([1, 2, 3]), 0.0)
    with pytest.raises(InferenceFailed):
        head_scores(f32([1, 2, 3]), f32([1, 2, 3]), 0.0)


def test_calibration():
    assert calibrate([-2.0, -1.0, 0.0], T27) == pytest.approx(P3, abs=1e-12)
    # The max is subtracted first: huge logits stay finite.
    p = calibrate([1000.0, 1001.0], 1.0)
    assert p == pytest.approx([0.2689414213699951, 0.7310585786300049], abs=1e-15)
    assert calibrate([0.0], 5.0) == [1.0]
    # Temperature flattens: T = 2 on [0, 2] is T = 1 on [0, 1].
    assert calibrate([0.0, 2.0], 2.0) == calibrate([0.0, 1.0], 1.0)


def _question(kind, n):
    criteria = {"choice": {"k%d" % i: None for i in range(n)}, "score": ["l%d" % i for i in range(n)]}.get(kind)
    qdef = {"type": kind, "instructions": "x", **({"criteria": criteria} if criteria else {})}
    return compile_request({"state": "s", "questions": {"q": qdef}}, make_export().variant)[1][0]


def test_answers_and_confidences():
    a = answer(_question("choice", 3), [0.2, 0.5, 0.3])
    assert a == {
        "type": "choice",
        "choice": "k1",
        "probabilities": {"k0": 0.2, "k1": 0.5, "k2": 0.3},
        "confidence": pytest.approx((0.5 - 1 / 3) / (1 - 1 / 3)),
    }
    assert answer(_question("choice", 3), [0.4, 0.2, 0.4])["choice"] == "k0"  # first max wins
    s = answer(_question("score", 3), [0.0, 0.0, 1.0])
    assert s["score"] == 2.0 and s["confidence"] == 1.0 and s["legend"] == {"0": "l0", "1": "l1", "2": "l2"}
    s = answer(_question("score", 2), [0.25, 0.75])
    # mode 1, distance 0.25, D = 0.5: 1 − 0.5
    assert s["score"] == 0.75 and s["confidence"] == 0.5
    assert answer(_question("noul", 0), [0.3, 0.7]) == {"type": "noul", "noul": 0.7}


def _context(kinds, export=None):
    export = export or make_export()
    questions = {
        "q%d" % i: (
            {"type": "noul", "instructions": "x"}
            if k == "noul"
            else {"type": "choice", "instructions": "x", "criteria": {"a": None, "b": None}}
        )
        for i, k in enumerate(kinds)
    }
    _, compiled = compile_request({"state": "s", "questions": questions}, export.variant)
    return Context(compiled, export, input_tokens=10, candidates=sum(q.candidates for q in compiled), started=0.0)


@pytest.mark.parametrize(
    "hidden", [[[float("nan")], [0.0], [0.0]], [[0.0], [float("inf")], [0.0]], [[0.0], [0.0], [-float("inf")]]]
)
def test_non_finite_scores_fail(hidden):
    with pytest.raises(InferenceFailed, match="non-finite"):
        finish(_context(["choice", "noul"]), f32(hidden))


def test_float32_overflow_fails():
    """A finite float64 sum beyond float32's range rounds to inf: an inference failure."""
    context = _context(["noul"], make_export(weight=[3e38, 3e38]))
    with pytest.raises(InferenceFailed):
        finish(context, f32([[1.0, 1.0]]))


def test_wrong_number_of_rows_fails():
    with pytest.raises(InferenceFailed):
        finish(_context(["choice", "noul"]), f32([[0.0], [0.0]]))
    with pytest.raises(InferenceFailed):
        finishing.finish_scores(_context(["choice"]), f32([0.0, 0.0, 0.0]))


def test_head_weight_and_bias_come_from_the_export():
    export = make_export(weight=[0.5, -2.0], bias=0.25, temperature=1.0)
    body = finish(_context(["noul"], export), f32([[4.0, 1.0]]))  # 2 − 2 + 0.25
    assert body["answers"]["q0"]["noul"] == pytest.approx(1 / (1 + math.exp(-0.25)), abs=1e-15)
    assert body["metadata"]["temperature"] == 1.0 and body["model"] == "Qwen/Qwen3.8-27B"
