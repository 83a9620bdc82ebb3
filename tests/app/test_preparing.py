"""app.runtime.preparing: the requests that reach the loop in one turn are prepared by one
`prepare_many` call (on a real tiny Laya), each gets its own result or error, and a request that
left before the turn ended is skipped."""

from __future__ import annotations

import asyncio

import pytest

from app.runtime.preparing import PrepareBatch
from models.errors import RequestError

GOOD = [
    {"state": "I was charged twice (%d)." % i, "questions": {"r": {"type": "noul", "instructions": "Refund?"}}}
    for i in range(5)
]
BAD = {"state": "x", "questions": {"q": {"type": "choice", "instructions": "pick", "criteria": {}}}}


class Counting:
    """The real model, with its prepare_many calls recorded."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def prepare_many(self, bodies, profiles=None):
        self.calls.append(len(bodies))
        return self.model.prepare_many(bodies, profiles)


def test_one_turn_one_call_each_its_own_answer(pipeline_english):
    model = Counting(pipeline_english.model)

    async def main():
        batch = PrepareBatch(model, asyncio.get_running_loop())
        bodies = GOOD[:2] + [BAD] + GOOD[2:]
        first = [batch.prepare(b) for b in bodies]  # one turn
        results = await asyncio.gather(*first, return_exceptions=True)
        later = await batch.prepare(GOOD[0])  # the next turn: a call of its own
        return results, later

    results, later = asyncio.run(main())
    assert model.calls == [6, 1]
    assert isinstance(results[2], RequestError) and "at least one option" in str(results[2].errors)
    expected = [pipeline_english.model.prepare(b) for b in GOOD[:2] + GOOD[2:]]
    assert [r.work for r in results[:2] + results[3:]] == [e.work for e in expected]
    assert later.work == expected[0].work


def test_a_request_gone_before_the_turn_ends_is_skipped(pipeline_english):
    model = Counting(pipeline_english.model)

    async def main():
        batch = PrepareBatch(model, asyncio.get_running_loop())
        gone, kept = batch.prepare(GOOD[0]), batch.prepare(GOOD[1])
        gone.cancel()
        return gone, await kept

    gone, kept = asyncio.run(main())
    assert gone.cancelled() and kept.work == pipeline_english.model.prepare(GOOD[1]).work


def test_a_broken_prepare_many_fails_every_waiter_not_the_loop(pipeline_english):
    class Broken:
        def prepare_many(self, bodies, profiles=None):
            raise RuntimeError("bug")

    async def main():
        batch = PrepareBatch(Broken(), asyncio.get_running_loop())
        return await asyncio.gather(batch.prepare(GOOD[0]), batch.prepare(GOOD[1]), return_exceptions=True)

    assert [str(r) for r in asyncio.run(main())] == ["bug", "bug"]


@pytest.mark.parametrize("n", [1, 3])
def test_the_default_prepare_many_is_prepare_for_each(pipeline_english, n):
    from models.base import ExportedModel

    model = pipeline_english.model
    out = ExportedModel.prepare_many(model, (GOOD[:n] + [BAD])[: n + 1])
    assert [o.work for o in out[:n]] == [model.prepare(b).work for b in GOOD[:n]]
    assert isinstance(out[n], RequestError)
