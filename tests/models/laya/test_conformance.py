"""Laya's adapter passes the conformance suite (tests/models/conformance.py): mixed requests in
one concurrent batch get the answers they get alone, through bucket-padded passes on the CPU."""
from __future__ import annotations

import pytest
from hypothesis import example, given

from tests.conftest import Harness
from tests.models import conformance

pytestmark = pytest.mark.slow       # a few hundred requests through the executor


@pytest.fixture(scope="module")
def laya(english):
    h = Harness([english[1]])
    yield h, h.slot("english")
    h.close()


# States past the model's window (truncated), choices past what one row holds (spread, jev).
LIMITS = {"question_types": ["choice", "score", "noul"], "max_choice_options": 255, "max_score_levels": 32,
          "max_questions": 64}


THREE = {"x": "X", "y": "Y", "z": "Z"}
# One option count over two question types, in a row bucket that pads (3 rows in 4): the defect
# that failed whole passes on the GPU; and a choice spread over rows (jev) beside it.
MIXED = {"model": "english", "state": "I was charged twice", "questions": {
    "a": {"type": "choice", "instructions": "Which?", "criteria": THREE},
    "b": {"type": "score", "instructions": "How much?", "criteria": ["low", "mid", "high"]},
    "c": {"type": "choice", "instructions": "Which else?", "criteria": THREE}}}
SPREAD = {"model": "english", "state": "refund " * 40, "questions": {
    "wide": {"type": "choice", "instructions": "Pick.", "criteria": {"o%d" % i: "option %d of many" % i
                                                                      for i in range(200)}}}}


@conformance.CONFORMANCE
@given(items=conformance.batches("english", LIMITS, max_words=700))
@example(items=[(MIXED, "reference"), (MIXED, "jev"), (SPREAD, "jev")])
def test_answers_alone_equal_answers_in_a_mixed_batch(laya, items):
    h, slot = laya
    assert slot.bucketed                    # the shapes a GPU replays, on the CPU
    conformance.check_batch_invariance(h, slot, items)


def test_the_limits_the_suite_draws_from_are_the_models(laya):
    _, slot = laya
    limits = slot.model.limits()
    assert {k: limits[k] for k in LIMITS} == LIMITS


def test_the_adapter_implements_the_contract(laya):
    conformance.check_contract(laya[1].model)
