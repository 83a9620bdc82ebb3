"""Cua-S1's adapter (one row per question, micro-batches of like lengths) passes the conformance
suite (tests/models/conformance.py): mixed requests in one concurrent batch get the answers they
get alone."""

from __future__ import annotations

import pytest

from tests.models import conformance

pytestmark = pytest.mark.slow  # a few hundred requests through the executor


class TestConformance(conformance.FamilyConformance):
    MODEL = "cua-s1-4b-0.2"
    LIMITS = {"question_types": ["choice"], "max_choice_options": 26, "max_questions": 64}
    MAX_WORDS = 400

    @pytest.fixture(scope="class")
    def export(self, cua_export):
        return cua_export
