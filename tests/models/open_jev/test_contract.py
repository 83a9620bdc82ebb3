"""The golden contract (models.md §4.5) end to end: prompts byte for byte, then answers from
hidden states through the head, calibration and the envelope, to 1e-12."""

from __future__ import annotations

import numpy as np
import pytest

from models.open_jev.finish import answer, calibrate, finish
from models.open_jev.prepare import compile_request, prepare, prompts
from tests.models.open_jev.conftest import make_export
from tests.models.open_jev.golden import CASES, P2, T27, close


@pytest.mark.parametrize("case", range(len(CASES)))
def test_prompts_are_byte_exact(case, export27):
    request, expected_prompts, _, _ = CASES[case]
    state_text, questions = compile_request(request, export27.variant)
    assert [prompts(state_text, q) for q in questions] == expected_prompts


@pytest.mark.parametrize("case", range(len(CASES)))
def test_answers_from_complete_logits(case, export27):
    """The reference's own step: a softmax over each question's complete logits."""
    request, _, logits, expected = CASES[case]
    _, questions = compile_request(request, export27.variant)
    answers = {q.qid: answer(q, calibrate(row, T27)) for q, row in zip(questions, logits)}
    close(answers, expected)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_answers_from_hidden_states(case, tokenizer, export27):
    """As served: one head score per candidate (a noul's is true − false), false fixed at 0."""
    request, _, logits, expected = CASES[case]
    rows, context, usage = prepare(request, tokenizer, export27)
    scores = [v for q, row in zip(context.questions, logits) for v in ([row[1] - row[0]] if q.kind == "noul" else row)]
    assert [r.question for r in rows] == [i for i, q in enumerate(context.questions) for _ in range(q.candidates)]
    hidden = np.asarray(scores, dtype=np.float32)[:, None]  # the identity head reads them back
    body = finish(context, hidden)
    close(body["answers"], expected)
    assert list(body) == ["model", "answers", "usage", "metadata"]
    assert body["usage"] == usage == {"input_tokens": sum(len(r.ids) for r in rows), "output_tokens": 0}
    assert body["metadata"]["candidate_sequences"] == len(rows) == len(scores)


def test_served_noul_minus_one():
    """A noul head score of −1 gives logits [0, −1]."""
    export = make_export("27b-v1.1", weight=[1.0], bias=0.0)
    request = {"state": "x", "questions": {"q": {"type": "noul", "instructions": "y"}}}
    _, questions = compile_request(request, export.variant)
    assert calibrate([0.0, -1.0], T27)[1] == pytest.approx(0.4026163222565936, abs=1e-12)

    from models.open_jev.prepare import Context

    context = Context(questions, export, input_tokens=7, candidates=1, started=0.0)
    body = finish(context, np.array([[-1.0]], dtype=np.float32), inference_seconds=0.5)
    assert body["answers"] == {"q": {"type": "noul", "noul": pytest.approx(P2[0], abs=1e-12)}}
    assert body["metadata"]["inference_seconds"] == 0.5


def test_metadata_and_identity(tokenizer, export27):
    request = CASES[0][0]
    rows, context, _ = prepare(request, tokenizer, export27)
    body = finish(context, np.zeros((len(rows), 1), dtype=np.float32))
    assert body["model"] == "Qwen/Qwen3.8-27B"
    meta = body["metadata"]
    assert list(meta) == [
        "method",
        "temperature",
        "candidate_sequences",
        "inference_seconds",
        "base_revision",
        "max_length",
        "prefix_cache",
    ]
    assert meta["method"] == "native_merged_lora_decision_head"
    assert meta["temperature"] == T27 and meta["candidate_sequences"] == 7
    assert meta["base_revision"] == "1d4bf0f2ff6012fd82039f2fa52739d0dd7c60c0"
    assert meta["max_length"] == 4096 and meta["inference_seconds"] >= 0.0
    assert meta["prefix_cache"] == {"enabled": False, "mode": "independent_candidates"}
    jev = finish(context, np.zeros((len(rows), 1), dtype=np.float32), profile="jev", model="open-jev")
    assert list(jev) == ["model", "answers", "usage", "x_metadata"] and jev["model"] == "open-jev"
    assert jev["answers"] == body["answers"]
    assert "confidence" not in jev["answers"]["refund_review"]
