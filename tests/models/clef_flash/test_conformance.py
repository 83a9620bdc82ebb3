"""Clef-Flash's batched-records adapter (one record a request, rows of one pass) passes the
conformance suite (tests/models/conformance.py): mixed requests in one concurrent batch get the
answers they get alone."""

from __future__ import annotations

import pytest

from tests.models import conformance

pytestmark = pytest.mark.slow  # a few hundred requests through the executor


class TestConformance(conformance.FamilyConformance):
    MODEL = "clef-flash"
    LIMITS = {
        "question_types": ["choice", "score", "noul"],
        "max_choice_options": 255,
        "max_score_levels": 10,
        "max_questions": 64,
    }
    MAX_WORDS = 600

    @pytest.fixture(scope="class")
    def export(self, clef_batched):
        return clef_batched
