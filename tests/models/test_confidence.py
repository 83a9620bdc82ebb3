"""Jev's confidences (models/confidence.py), which every model's finishing uses."""

from __future__ import annotations

import pytest

from models import confidence

P3 = [0.5, 0.3, 0.2]


def test_choice_is_zero_for_a_uniform_answer_and_one_for_a_certain_one():
    assert confidence.jev_choice([1 / 3] * 3) == pytest.approx(0.0, abs=1e-15)
    assert confidence.jev_choice([0.0, 1.0, 0.0]) == 1.0
    assert confidence.jev_choice([1.0]) == 1.0
    assert confidence.jev_choice(P3) == pytest.approx((0.5 - 1 / 3) / (2 / 3), abs=1e-15)


def test_score_measures_the_spread_around_the_most_probable_level():
    assert confidence.jev_score([0.0, 0.0, 1.0]) == 1.0
    assert confidence.jev_score([1.0]) == 1.0
    # Spread 0.3·1 + 0.2·2 = 0.7 around level 0, against D = (1 + 0 + 1) / 3.
    assert confidence.jev_score(P3) == pytest.approx(max(0.0, 1 - 0.7 / (2 / 3)), abs=1e-15)
    assert confidence.jev_score([0.1, 0.8, 0.1]) == pytest.approx(1 - 0.2 / (2 / 3), abs=1e-15)
    # Tied levels: the first is the mode (spread 0.4 + 0.2 + 0.3 around level 0, D = 1).
    assert confidence.jev_score([0.4, 0.4, 0.1, 0.1]) == pytest.approx(0.1, abs=1e-12)


def test_kind_picks_the_formula():
    assert confidence.jev("choice", P3) == confidence.jev_choice(P3)
    assert confidence.jev("score", P3) == confidence.jev_score(P3)
