"""app.runtime.preparing: the requests that reach the loop in one turn are prepared by one
`prepare_many` call (on a real tiny Laya), each gets its own result or error, and a request that
left before the turn ended is skipped; with a tokenizer thread, a large turn's tokenizer call runs
there, in arrival order with the turns after it."""
from __future__ import annotations

import asyncio

import pytest

from app.runtime.preparing import PrepareBatch
from models.errors import RequestError

GOOD = [{"state": "I was charged twice (%d)." % i, "questions": {"r": {"type": "noul", "instructions": "Refund?"}}}
        for i in range(5)]
BAD = {"state": "x", "questions": {"q": {"type": "choice", "instructions": "pick", "criteria": {}}}}


class Counting:
    """The real model, with its prepare_many calls recorded."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def prepare_many(self, bodies):
        self.calls.append(len(bodies))
        return self.model.prepare_many(bodies)

    def prepare_stages(self, bodies):
        return self.model.prepare_stages(bodies)


def test_one_turn_one_call_each_its_own_answer(pipeline_english):
    model = Counting(pipeline_english.model)

    async def main():
        batch = PrepareBatch(model, asyncio.get_running_loop())
        bodies = GOOD[:2] + [BAD] + GOOD[2:]
        first = [batch.prepare(b) for b in bodies]           # one turn
        results = await asyncio.gather(*first, return_exceptions=True)
        later = await batch.prepare(GOOD[0])                 # the next turn: a call of its own
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
        def prepare_many(self, bodies):
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


class Thread:
    """The tokenizer thread (one worker, as the engine makes it), with what it was given recorded."""

    def __init__(self):
        from concurrent.futures import ThreadPoolExecutor

        self.pool, self.calls = ThreadPoolExecutor(1, thread_name_prefix="omni-tokenize"), []

    def submit(self, fn, *args):
        import threading

        def run():
            self.calls.append((threading.current_thread().name, len(args[0])))
            return fn(*args)
        return self.pool.submit(run)

    def shutdown(self, wait=True, **kwargs):
        self.pool.shutdown(wait=wait)


def test_a_turn_of_four_or_more_tokenizes_on_the_thread_with_the_same_answers(pipeline_english):
    from app.runtime.preparing import OFF_LOOP_MIN

    model, thread = Counting(pipeline_english.model), Thread()

    async def main():
        batch = PrepareBatch(model, asyncio.get_running_loop(), thread)
        bodies = GOOD[:2] + [BAD] + GOOD[2:]
        big = await asyncio.gather(*[batch.prepare(b) for b in bodies], return_exceptions=True)
        small = await asyncio.gather(*[batch.prepare(b) for b in GOOD[:OFF_LOOP_MIN - 1]])
        return big, small

    try:
        big, small = asyncio.run(main())
    finally:
        thread.shutdown()
    # The turn of six went to the thread (its five valid states in one call); the turn of three
    # stayed whole on the loop.
    assert thread.calls == [("omni-tokenize_0", 5)] and model.calls == [OFF_LOOP_MIN - 1]
    assert isinstance(big[2], RequestError) and "at least one option" in str(big[2].errors)
    expected = [pipeline_english.model.prepare(b) for b in GOOD]
    assert [r.work for r in big[:2] + big[3:]] == [e.work for e in expected]
    assert [r.work for r in small] == [e.work for e in expected[:OFF_LOOP_MIN - 1]]


def test_turns_after_one_on_the_thread_follow_it_there_in_order(pipeline_english):
    """A small turn that comes while a large one is being tokenized goes to the thread behind it,
    and the requests are answered in the order they came."""
    import threading

    model, thread, gate = Counting(pipeline_english.model), Thread(), threading.Event()
    tokenize = pipeline_english.model.tok.encode_batch

    class Held:                      # the first call waits until the second turn has been flushed
        def __init__(self, stages):
            self.stages = stages

        def __getattr__(self, name):
            return getattr(self.stages, name)

        def tokenize(self, texts):
            gate.wait(5)
            return tokenize(texts)

    first = []

    class Staged(Counting):
        def prepare_stages(self, bodies):
            stages = self.model.prepare_stages(bodies)
            if not first:
                first.append(stages)
                from models.base import Stages
                return Stages(stages.texts, Held(stages).tokenize, stages.complete)
            return stages

    staged = Staged(pipeline_english.model)
    done: list[int] = []

    async def main():
        batch = PrepareBatch(staged, asyncio.get_running_loop(), thread)
        big = [batch.prepare(b) for b in GOOD[:4]]
        for i, f in enumerate(big):
            f.add_done_callback(lambda _, i=i: done.append(i))
        await asyncio.sleep(0)                   # the first turn flushes: its call is on the thread
        assert batch.off_loop == 1
        one = batch.prepare(GOOD[4])             # a turn of one, behind it
        one.add_done_callback(lambda _: done.append(4))
        await asyncio.sleep(0.05)
        assert not done                          # nothing answered while the first call is held
        gate.set()
        return await asyncio.gather(*big, one)

    try:
        results = asyncio.run(main())
    finally:
        thread.shutdown()
    assert [c[1] for c in thread.calls] == [4, 1] and staged.calls == []
    assert done == [0, 1, 2, 3, 4]
    assert [r.work for r in results] == [pipeline_english.model.prepare(b).work for b in GOOD]


def test_a_failed_tokenizer_call_on_the_thread_fails_its_turn_only(pipeline_english):
    from models.base import Stages

    class Failing(Counting):
        def prepare_stages(self, bodies):
            stages = self.model.prepare_stages(bodies)

            def broken(texts):
                raise RuntimeError("tokenizer down")
            return Stages(stages.texts, broken, stages.complete)

    thread = Thread()

    async def main():
        batch = PrepareBatch(Failing(pipeline_english.model), asyncio.get_running_loop(), thread)
        failed = await asyncio.gather(*[batch.prepare(b) for b in GOOD[:4]], return_exceptions=True)
        later = await batch.prepare(GOOD[0])     # a turn of one afterwards: whole, on the loop
        return failed, later, batch.off_loop

    try:
        failed, later, off_loop = asyncio.run(main())
    finally:
        thread.shutdown()
    assert [str(r) for r in failed] == ["tokenizer down"] * 4
    assert off_loop == 0 and later.work == pipeline_english.model.prepare(GOOD[0]).work


def test_laya_stages_are_prepare_many_cut_around_the_tokenizer(pipeline_english):
    model = pipeline_english.model
    bodies = GOOD[:2] + [BAD] + GOOD[2:]
    stages = model.prepare_stages(bodies)
    assert len(stages.texts) == 5
    staged = stages.complete(stages.tokenize(stages.texts))
    whole = model.prepare_many(bodies)
    assert isinstance(staged[2], RequestError) and isinstance(whole[2], RequestError)
    assert [s.work for i, s in enumerate(staged) if i != 2] == [w.work for i, w in enumerate(whole) if i != 2]
    only_bad = model.prepare_stages([BAD])
    assert only_bad.texts == [] and isinstance(only_bad.complete([])[0], RequestError)
