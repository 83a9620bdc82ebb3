"""Laya's `prepare_many` (every state in one tokenizer call) is `prepare` for each body: the same
rows, usage and questions, and the same error for a bad body, which fails alone."""

from __future__ import annotations

import pytest

from models.errors import RequestError
from tests.models.laya.cases import CASES, LONG


def _bodies():
    good = [{"state": state, "questions": questions} for _, state, questions in CASES]
    good.append(
        {
            "state": ["first turn", {"speaker": "agent", "text": LONG}, LONG],  # truncated from the left
            "questions": {"r": {"type": "noul", "instructions": "Refund?"}},
        }
    )
    good.append(
        {"state": "a state with a [MASK] token in it", "questions": {"r": {"type": "noul", "instructions": "Refund?"}}}
    )
    bad = [
        {"questions": {"r": {"type": "noul", "instructions": "Refund?"}}},  # no state
        {"state": "x", "questions": {"q": {"type": "choice", "instructions": "pick", "criteria": {}}}},
        {"state": "x" * 300_000, "questions": {"r": {"type": "noul", "instructions": "Refund?"}}},
        {
            "state": "x",
            "questions": {
                "q": {
                    "type": "choice",
                    "instructions": "pick",  # no room for its options
                    "criteria": {"o%d" % i: "option " * 40 for i in range(200)},
                }
            },
        },
    ]
    # Bad bodies between good ones: what a bad body raises must not shift the states' ids.
    return [b for pair in zip(good, bad + [None] * len(good)) for b in pair if b is not None]


def _fields(p):
    questions, usage = p.context
    return p.rows, p.tokens, p.longest, p.questions, p.work, questions, usage


def test_prepare_many_is_prepare_for_each_body(pipeline_english):
    model = pipeline_english.model
    bodies = _bodies()
    alone = []
    for body in bodies:
        try:
            alone.append(model.prepare(body))
        except RequestError as exc:
            alone.append(exc)
    together = model.prepare_many(bodies)
    assert len(together) == len(bodies)
    assert sum(isinstance(a, RequestError) for a in alone) == 4
    for a, t in zip(alone, together):
        if isinstance(a, Exception):
            assert type(t) is type(a) and str(t) == str(a)
            assert getattr(t, "errors", None) == getattr(a, "errors", None)
        else:
            assert _fields(t) == _fields(a)
    assert any(_fields(t)[-1]["truncated"] for t in together if not isinstance(t, Exception))


@pytest.mark.parametrize("n", [0, 1])
def test_prepare_many_of_none_or_one(pipeline_english, n):
    model = pipeline_english.model
    bodies = [{"state": "I was charged twice.", "questions": {"r": {"type": "noul", "instructions": "Refund?"}}}][:n]
    assert [_fields(p) for p in model.prepare_many(bodies)] == [_fields(model.prepare(b)) for b in bodies]
