"""Open-Jev's adapter (one row per candidate, micro-batches of like lengths) passes the conformance
suite (tests/models/conformance.py): mixed requests in one concurrent batch get the answers they
get alone."""

from __future__ import annotations

import pytest

from tests.models import conformance

pytestmark = pytest.mark.slow  # a few hundred requests through the executor


class TestConformance(conformance.FamilyConformance):
    MODEL = "open-jev-9b"
    LIMITS = {
        "question_types": ["choice", "score", "noul"],
        "max_choice_options": 255,
        "max_score_levels": 10,
        "max_questions": 4096,
    }
    MAX_WORDS = 250
    # A choice's options are rows of their own (candidates), each a pass's row on the CPU: up to 12
    # options a choice and 3 questions a request keep the suite to a minute.
    KW = {"cap": 12, "max_questions": 3}

    @pytest.fixture(scope="class")
    def export(self, jev_export):
        return jev_export
