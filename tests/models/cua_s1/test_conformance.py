"""Cua-S1's adapter (one row per question, micro-batches of like lengths) passes the conformance
suite (tests/models/conformance.py): mixed requests in one concurrent batch get the answers they
get alone."""
from __future__ import annotations

import pytest
from hypothesis import given

from tests.conftest import Harness
from tests.models import conformance

pytestmark = pytest.mark.slow       # a few hundred requests through the executor

LIMITS = {"question_types": ["choice"], "max_choice_options": 26, "max_questions": 64}


@pytest.fixture(scope="module")
def served(cua_export):
    h = Harness([cua_export])
    yield h, h.registry.slots[0]
    h.close()


@conformance.CONFORMANCE
@given(items=conformance.batches("cua-s1-4b-0.2", LIMITS, max_words=400))
def test_answers_alone_equal_answers_in_a_mixed_batch(served, items):
    h, slot = served
    conformance.check_batch_invariance(h, slot, items)


def test_the_limits_the_suite_draws_from_are_the_models(served):
    _, slot = served
    limits = slot.model.limits()
    assert {k: limits[k] for k in LIMITS} == LIMITS


def test_the_adapter_implements_the_contract(served):
    conformance.check_contract(served[1].model)
