"""Laya's adapter passes the conformance suite (tests/models/conformance.py): mixed requests in
one concurrent batch get the answers they get alone, through bucket-padded passes on the CPU."""

from __future__ import annotations

import pytest

from tests.models import conformance

pytestmark = pytest.mark.slow  # a few hundred requests through the executor

THREE = {"x": "X", "y": "Y", "z": "Z"}
# One option count over two question types, in a row bucket that pads (3 rows in 4): the defect
# that failed whole passes on the GPU; and a choice spread over rows (jev) beside it.
MIXED = {
    "model": "english",
    "state": "I was charged twice",
    "questions": {
        "a": {"type": "choice", "instructions": "Which?", "criteria": THREE},
        "b": {"type": "score", "instructions": "How much?", "criteria": ["low", "mid", "high"]},
        "c": {"type": "choice", "instructions": "Which else?", "criteria": THREE},
    },
}
SPREAD = {
    "model": "english",
    "state": "refund " * 40,
    "questions": {
        "wide": {
            "type": "choice",
            "instructions": "Pick.",
            "criteria": {"o%d" % i: "option %d of many" % i for i in range(200)},
        }
    },
}


class TestConformance(conformance.FamilyConformance):
    MODEL = "english"
    # States past the model's window (truncated), choices past what one row holds (spread, jev).
    LIMITS = {
        "question_types": ["choice", "score", "noul"],
        "max_choice_options": 255,
        "max_score_levels": 32,
        "max_questions": 64,
    }
    MAX_WORDS = 700

    @pytest.fixture(scope="class")
    def export(self, english):
        return english[1]

    def test_a_padded_bucket_of_one_option_count_and_a_spread_choice(self, served):
        h, slot = served
        assert slot.bucketed  # the shapes a GPU replays, on the CPU
        conformance.check_batch_invariance(h, slot, [(MIXED, "reference"), (MIXED, "jev"), (SPREAD, "jev")])
