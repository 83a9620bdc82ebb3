"""Calibration and confidence formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest

from models.laya.checkpoint import calibration, clamp_temperature, infer_variant, temp_bucket
from models.laya.finish import entropy_confidence, jev_confidence, softmax_row

# Open-Jev's golden fixture (models.md §4.5): T = 2.5343690298472983, logits −2, −1, 0.
P3 = [0.21343437444688138, 0.3166841593736535, 0.4698814661794651]
P2 = [0.4026163222565936, 0.5973836777434065]


def test_jev_confidence_golden():
    assert jev_confidence("choice", P3) == pytest.approx(0.20482219926919762, abs=1e-12)
    assert jev_confidence("choice", P2) == pytest.approx(0.194767355486813, abs=1e-12)
    assert jev_confidence("score", P3) == 0.0  # distance 0.7436 > D 0.6667
    assert jev_confidence("choice", [1.0]) == 1.0
    assert jev_confidence("choice", [0.5, 0.5]) == 0.0
    assert jev_confidence("noul", P2) is None
    assert jev_confidence("score", [0.0, 0.0, 1.0]) == 1.0


def test_entropy_confidence():
    assert entropy_confidence(np.array([1.0], dtype=np.float32), 1) == 1.0
    assert entropy_confidence(np.array([0.5, 0.5], dtype=np.float32), 2) == pytest.approx(0.0, abs=1e-6)
    p = np.array(P3, dtype=np.float32)
    h = -sum(x * math.log(x) for x in P3)
    assert entropy_confidence(p, 3) == pytest.approx(1 - h / math.log(3), abs=1e-6)


def test_softmax_with_temperature():
    p = softmax_row(np.array([-2.0, -1.0, 0.0], dtype=np.float32), 2.5343690298472983)
    assert p.dtype == np.float32
    np.testing.assert_allclose(p, P3, atol=1e-6)


@pytest.mark.parametrize(
    "raw,applied",
    [
        (0.1006, 0.5),
        (9, 5.0),
        (1.7602, 1.7602),
        (True, 1.0),
        (float("nan"), 1.0),
        (float("inf"), 1.0),
        ("x", 1.0),
        (None, 1.0),
    ],
)
def test_clamp_temperature(raw, applied):
    assert clamp_temperature(raw) == applied


def test_calibration_warns_about_replaced_entries():
    with pytest.warns(RuntimeWarning, match="choice:11\\+"):
        cal = calibration({"temperature": [1.6, 1.2, 1.9], "temperature_by_options": {"choice:11+": 0.1006}})
    assert cal["temperature_by_options"]["choice:11+"] == 0.5
    assert cal["temperature_by_options_raw"]["choice:11+"] == 0.1006
    with pytest.raises(ValueError):
        calibration({"temperature": [1.0, 2.0]})


def test_buckets_and_variants():
    assert [temp_bucket(0, k) for k in (1, 2, 3, 5, 6, 10, 11, 255)] == [
        "choice:2",
        "choice:2",
        "choice:3-5",
        "choice:3-5",
        "choice:6-10",
        "choice:6-10",
        "choice:11+",
        "choice:11+",
    ]
    assert temp_bucket(2, 2) == "noul:2" and temp_bucket(1, 4) == "score:3-5"
    assert infer_variant("convaiinnovations/laya", {}) == "english"
    assert infer_variant("convaiinnovations/laya/multilingual", {}) == "multilingual"
    assert infer_variant("convaiinnovations/laya-typed-decisions", {}) == "typed-decisions"
    assert infer_variant("/data/ck", {"vocab_size": 256000}) == "multilingual"


def test_batch_calibration_is_bit_identical_to_each_row_alone():
    """calibrate() groups rows by option count; each row's probabilities, confidence, expected
    score and top option must be exactly what the one-row formulas give (fp32 and fp16 logits,
    2-255 options, reordered options, per-bucket temperatures)."""
    from models.laya.finish import calibrate

    calib = {
        "temperature": {0: 1.3, 1: 0.77, 2: 2.53},
        "temperature_by_options": {"choice:3-5": 0.61, "choice:11+": 1.7},
    }
    rng = np.random.default_rng(1)
    checked = 0
    for trial in range(60):
        rows = []
        for _ in range(int(rng.integers(1, 48))):
            qt = int(rng.integers(0, 3))
            k = 2 if qt == 2 else int(rng.integers(2, 256 if rng.random() < 0.3 else 12))
            rows.append((k, qt, rng.permutation(k).tolist() if rng.random() < 0.3 else None))
        logits = rng.standard_normal((len(rows), max(k for k, _, _ in rows) + 2)) * rng.uniform(0.1, 40)
        logits = logits.astype(np.float16 if trial % 2 else np.float32)
        act = rng.random((len(rows), 2)).astype(np.float32)
        for i, ((k, qt, order), c) in enumerate(zip(rows, calibrate(logits, act, rows, calib))):
            p = softmax_row(
                np.asarray(logits[i, :k], dtype=np.float32),
                calib["temperature_by_options"].get(temp_bucket(qt, k), calib["temperature"][qt]),
            )
            if order is not None:
                canonical = np.empty_like(p)
                canonical[np.asarray(order)] = p
                p = canonical
            assert c.probs == p.tolist() and c.top == int(p.argmax())
            assert c.confidence == entropy_confidence(p, k)
            assert c.expected == float((np.arange(k) * p).sum())
            assert c.act == float(act[i, 0]) and c.finite
            checked += 1
    assert checked > 1000
