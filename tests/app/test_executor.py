"""The executor thread: batching invariance, routing, model isolation, cancellation, faults."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import numpy as np
import pytest

from app.runtime.executor import Overloaded
from app.runtime.registry import SlotState
from models.errors import InferenceFailed
from models.laya.finish import softmax_row
from models.registry import load
from tests.conftest import Harness
from tests.models.laya.cases import CASES


def test_answers_are_the_same_alone_or_batched(pipeline_english):
    bodies = [{"state": s, "questions": q} for _, s, q in CASES]
    alone = [pipeline_english.outputs([b])[1][0] for b in bodies]
    prepared, batched, packed = pipeline_english.outputs(bodies)
    assert packed.rows == sum(len(q) for _, _, q in CASES)
    assert packed.padded_tokens > packed.real_tokens  # real padding happened
    calib = pipeline_english.model.calibration
    for (la, aa, ca), (lb, ab, cb), p in zip(alone, batched, prepared):
        for row, r in enumerate(p.work):
            k = len(r.markers)
            t = calib["temperature"][r.qtype]
            pa, pb = softmax_row(la[row, :k], t), softmax_row(lb[row, :k], t)
            np.testing.assert_allclose(pa, pb, atol=1e-5, rtol=0)  # fp32, before rounding
            # ... and as the adapter calibrates them, batch by batch (a temperature below 1 widens
            # the last bits by which packed rows' fp32 products differ)
            np.testing.assert_allclose(ca[row].probs, cb[row].probs, atol=1e-5, rtol=0)
        np.testing.assert_allclose(aa, ab, atol=1e-5, rtol=0)
    for p, out_alone, out_batched in zip(prepared, alone, batched):
        a = pipeline_english.model.finish(p, out_alone, "reference", "english")
        b = pipeline_english.model.finish(p, out_batched, "reference", "english")
        for qid in a["answers"]:
            pa, pb = a["answers"][qid].get("probabilities"), b["answers"][qid].get("probabilities")
            if pa:
                assert max(abs(x - y) for x, y in zip(pa.values(), pb.values())) <= 1e-4
        assert a["usage"] == b["usage"]  # padding never counts


@pytest.fixture
def harness():
    """Harness(exports, **settings) for a test; every executor it started is stopped after."""
    made = []

    def make(exports, **settings):
        made.append(Harness(exports, **settings))
        return made[-1]

    yield make
    for h in made:
        h.close()


@pytest.fixture
def two_models(english, multilingual, harness):
    return harness([english[1], multilingual[1]])


def test_batches_never_mix_models_and_route_results(two_models):
    h = two_models
    bodies = [{"state": s, "questions": q} for _, s, q in CASES[:10]]

    async def main():
        work = []
        with h.executor._cv:  # queue everything before the thread can take any of it
            for i, body in enumerate(bodies):
                slot = h.slot("english" if i % 2 == 0 else "multilingual")
                prepared = slot.model.prepare(body)
                work.append((slot, body, prepared, h.executor.submit(slot, prepared)))
        return work, [(slot, body, p, await job.future) for slot, body, p, job in work]

    work, results = asyncio.run(main())
    # Grouped by each job's batch (set before its future resolves; on_batch may come later).
    passes: dict[int, list] = {}
    for slot, _, _, job in work:
        passes.setdefault(id(job.batch), []).append((slot, job.batch))
    assert any(len(p) > 1 for p in passes.values())  # it did batch across requests
    for members in passes.values():
        assert {slot.name for slot, _ in members} == {members[0][1].model}
        info = members[0][1]
        assert 0 < info.forward_s <= info.ended - info.started  # the runs, within the pass
    for slot, body, p, output in results:
        logits, act, *_ = output
        assert logits.shape[0] == p.rows  # each request got its own rows
        alone = slot.model.finish(p, output, "reference", slot.name)["answers"]
        assert list(alone) == list(body["questions"])


def test_cancelled_before_dispatch_is_skipped(english, harness):
    h = harness([english[1]])
    slot = h.slot("english")
    body = {"state": CASES[0][1], "questions": CASES[0][2]}

    async def main():
        with h.executor._cv:
            first = h.executor.submit(slot, slot.model.prepare(body))
            dropped = h.executor.submit(slot, slot.model.prepare(body))
            dropped.future.cancel()
            third = h.executor.submit(slot, slot.model.prepare(body))
        await first.future
        await third.future
        return first, dropped, third

    first, dropped, third = asyncio.run(main())
    assert dropped.dispatched == 0.0 and dropped.batch is None
    assert first.batch is not None and third.batch is not None  # set before their futures resolve


def test_budgets_keep_fifo_order(english, harness):
    h = harness([english[1]], max_batch_rows=4)
    slot = h.slot("english")
    three = {"state": CASES[0][1], "questions": CASES[0][2]}  # 3 rows each

    async def main():
        with h.executor._cv:
            jobs = [h.executor.submit(slot, slot.model.prepare(three)) for _ in range(4)]
        for j in jobs:
            await j.future
        return jobs

    jobs = asyncio.run(main())
    # Each job's batch is set before its future resolves (on_batch may run after the await).
    starts = [j.batch.started for j in jobs]
    assert starts == sorted(starts)  # FIFO
    assert all(j.batch.rows <= 4 for j in jobs)


@pytest.mark.parametrize("max_rows, sizes", [(256, [8]), (3, [3, 3, 2]), (4, [4, 4])])
def test_waiting_requests_fill_passes_in_order(english, harness, pipeline_english, max_rows, sizes):
    """Requests that all wait before the thread takes any fill passes up to the row budget,
    oldest first; the rest run in the next pass, and every request gets its own answers.
    Without bucketed shapes, so a pass's rows are its requests' rows."""
    h = harness([english[1]], max_batch_rows=max_rows, cuda_graphs=0)
    slot = h.slot("english")
    bodies = [
        {
            "state": "ticket %d: I was charged twice" % i,
            "questions": {"refund": {"type": "noul", "instructions": "Refund?"}},
        }
        for i in range(8)
    ]

    async def main():
        with h.executor._cv:  # all 8 one-row requests wait before the thread takes any
            jobs = [h.executor.submit(slot, slot.model.prepare(b)) for b in bodies]
        return jobs, [await j.future for j in jobs]

    jobs, outputs = asyncio.run(main())
    # Each job's batch is set before its future resolves (on_batch may run after the await).
    passes = list(dict.fromkeys(id(j.batch) for j in jobs))  # in submission order
    infos = {id(j.batch): j.batch for j in jobs}
    assert [infos[p].rows for p in passes] == sizes
    ids = [id(j.batch) for j in jobs]
    assert ids == sorted(ids, key=passes.index)  # FIFO: each pass a run of jobs
    assert [infos[p].started for p in passes] == sorted(infos[p].started for p in passes)
    for body, job, output in zip(bodies, jobs, outputs):
        got = slot.model.finish(job.prepared, output, "reference", "english")["answers"]["refund"]
        alone = pipeline_english(body)["answers"]["refund"]
        assert got["type"] == "noul" and abs(got["noul"] - alone["noul"]) <= 1e-4  # rounded to 4 places


def test_requests_of_far_apart_lengths_share_one_pass_packed(english, harness, pipeline_english):
    """Short and long requests waiting together run in one pass, the short rows packed into batch
    rows beside the long ones rather than padded to them; answers unchanged. Without bucketed
    shapes (no graph policy), so the pass runs at its own shape."""
    h = harness([english[1]], cuda_graphs=0)
    slot = h.slot("english")
    question = {"refund": {"type": "noul", "instructions": "Refund?"}}
    short = "I was charged twice."
    long = " ".join(["The parcel arrived late, the box was wet and two items were missing."] * 24)
    bodies = [{"state": ("%d: " % i) + (long if i % 2 else short), "questions": question} for i in range(6)]
    prepared = [slot.model.prepare(b) for b in bodies]
    assert min(p.longest for p in prepared[1::2]) > 300 > 40 > max(p.longest for p in prepared[::2])

    async def main():
        with h.executor._cv:  # all six wait before the thread takes any
            jobs = [h.executor.submit(slot, p) for p in prepared]
        return jobs, [await j.future for j in jobs]

    jobs, outputs = asyncio.run(main())
    assert len({id(j.batch) for j in jobs}) == 1
    batch, longest = jobs[0].batch, max(p.longest for p in prepared)
    assert batch.rows == 6 and batch.padded_tokens < 6 * longest  # the short rows did not pad to the long
    assert batch.meta["batch_rows"] == 4  # a long row each, and the three short ones in one
    for body, job, output in zip(bodies, jobs, outputs):
        got = slot.model.finish(job.prepared, output, "reference", "english")["answers"]["refund"]
        assert abs(got["noul"] - pipeline_english(body)["answers"]["refund"]["noul"]) <= 1e-4


def test_queue_full_is_overloaded(english, harness):
    h = harness([english[1]], queue_size=2)
    slot = h.slot("english")
    body = {"state": CASES[0][1], "questions": CASES[0][2]}

    async def main():
        with h.executor._cv:
            jobs = [h.executor.submit(slot, slot.model.prepare(body)) for _ in range(2)]
            with pytest.raises(Overloaded):
                h.executor.submit(slot, slot.model.prepare(body))
        for j in jobs:
            await j.future

    asyncio.run(main())


def test_the_queue_holds_a_bounded_number_of_tokens(english, harness):
    """Past QUEUED_PASSES passes' worth of tokens waiting, a request is overloaded; one that
    finds the queue empty comes in however large."""
    from app.runtime.batching import cost
    from app.runtime.batching import QUEUED_PASSES

    h = harness([english[1]], max_batch_tokens=32)
    slot = h.slot("english")
    prepared = slot.model.prepare({"state": CASES[0][1], "questions": CASES[0][2]})
    each = prepared.rows * prepared.longest
    assert each > QUEUED_PASSES * 32 // 2  # two of them pass the bound

    async def main():
        with h.executor._cv:
            first = h.executor.submit(slot, prepared)
            with pytest.raises(Overloaded, match="tokens are already waiting"):
                h.executor.submit(slot, slot.model.prepare({"state": CASES[0][1], "questions": CASES[0][2]}))
        await first.future
        assert cost(first) == each

    asyncio.run(main())


class _FailingOnce:
    """Wraps a real session; its first run raises, like a transient device error."""

    def __init__(self, session):
        self.session, self.failed = session, False

    def run(self, *args, **kwargs):
        if not self.failed:
            self.failed = True
            raise RuntimeError("injected failure")
        return self.session.run(*args, **kwargs)


def test_a_failed_batch_fails_only_its_requests(english, harness, caplog):
    from app import logs

    h = harness([english[1]])
    slot = h.slot("english")
    slot.session = _FailingOnce(slot.session)
    body = {"state": CASES[0][1], "questions": CASES[0][2]}

    async def main():
        token = logs.current_request.set("rid-of-the-failed-one")  # as the request's context sets it
        bad = h.executor.submit(slot, slot.model.prepare(body))
        logs.current_request.reset(token)
        with pytest.raises(InferenceFailed):
            await bad.future
        good = h.executor.submit(slot, slot.model.prepare(body))
        return await good.future

    with caplog.at_level(logging.ERROR, logger="omni"):
        logits, act, *_ = asyncio.run(main())
    assert np.isfinite(logits).all()
    assert slot.state is SlotState.WARMING  # not fatal: the model stays usable
    (line,) = [r.getMessage() for r in caplog.records if "failed (requests" in r.getMessage()]
    assert line == "batch of 1 requests for english failed (requests rid-of-the-failed-one)"


class _RecordingGraphs:
    """Stands in for a GraphRunner's two entry points over a real CPU session, recording which
    one each batch took and the shape it ran at."""

    def __init__(self, session):
        self.session, self.calls = session, []

    def run(self, names, feeds):
        self.calls.append(("replay", feeds["input_ids"].shape))
        return self.session.run(names, feeds)

    def run_uncaptured(self, names, feeds):
        self.calls.append(("uncaptured", feeds["input_ids"].shape))
        return self.session.run(names, feeds)


def test_only_small_batches_take_bucketed_graph_shapes(english, harness):
    h = harness([english[1]], cuda_graph_rows=4)
    slot = h.slot("english")
    slot.session, slot.static_shapes = _RecordingGraphs(slot.session), True
    one = {"state": CASES[0][1], "questions": {"q": {"type": "noul", "instructions": "Refund?"}}}

    async def main(n):
        with h.executor._cv:  # queued together: one batch of n rows
            jobs = [h.executor.submit(slot, slot.model.prepare(one)) for _ in range(n)]
        return [await j.future for j in jobs]

    small, large = asyncio.run(main(3)), asyncio.run(main(6))
    (kind_small, shape_small), (kind_large, shape_large) = slot.session.calls
    assert kind_small == "replay" and shape_small[0] == 4 and shape_small[1] % 64 == 0  # bucketed
    assert kind_large == "uncaptured" and shape_large[0] == 6  # its own shape
    # Same answers in the real marker columns (a noul question has 2; the bucket pads to 8).
    np.testing.assert_allclose(small[0][0][:, :2], large[0][0][:, :2], atol=1e-6, rtol=0)


def test_a_models_token_bound_sends_larger_batches_uncaptured(english, harness, monkeypatch):
    """A GraphPolicy's max_tokens (the Qwen families' bound) keeps batches of more padded tokens
    out of the bucketed shapes even within the row bound."""
    from models.base import GraphPolicy

    h = harness([english[1]], cuda_graph_rows=16)
    slot = h.slot("english")
    slot.session, slot.static_shapes = _RecordingGraphs(slot.session), True
    one = {"state": CASES[0][1], "questions": {"q": {"type": "noul", "instructions": "Refund?"}}}
    longest = slot.model.prepare(one).longest
    monkeypatch.setattr(slot.model, "cuda_graphs", GraphPolicy(capture_after=2, max_tokens=2 * longest))

    async def main(n):
        with h.executor._cv:
            jobs = [h.executor.submit(slot, slot.model.prepare(one)) for _ in range(n)]
        return [await j.future for j in jobs]

    asyncio.run(main(2)), asyncio.run(main(3))
    (kind_two, shape_two), (kind_three, shape_three) = slot.session.calls
    assert kind_two == "replay" and shape_two[0] == 2
    assert kind_three == "uncaptured" and shape_three[0] == 3


def _until(predicate, timeout: float = 20.0) -> None:
    """Wait (bounded) for something the executor thread does between passes."""
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def _same_answers(a: dict, b: dict) -> None:
    assert a["answers"].keys() == b["answers"].keys() and a["usage"] == b["usage"]
    for qid, answer in a["answers"].items():
        pa, pb = answer.get("probabilities"), b["answers"][qid].get("probabilities")
        if pa:
            assert max(abs(x - y) for x, y in zip(pa.values(), pb.values())) <= 1e-4
        else:
            assert answer == b["answers"][qid]


def _watched(executor, plain, max_graphs: int, capture_after: int = 1, delay: float = 0.0):
    """A GraphRunner bound on the CPU (the same bookkeeping, no CUDA) that notes each capture
    (start, end, jobs queued as it began) and each replay-or-count run (whether it replayed, the
    graphs held then); `delay` lengthens every capture, as a GPU's take 50-450 ms."""
    from app.runtime.sessions import GraphRunner

    class Watched(GraphRunner):
        def capture(self, feeds):
            t0, queued = time.perf_counter(), len(executor._queue)
            self.started.set()
            time.sleep(delay)
            took = super().capture(feeds)
            self.captures.append((t0, time.perf_counter(), queued))
            return took

        def run(self, names, feeds):
            self.runs.append((self.shape_key(feeds) in self.graphs, len(self.graphs)))
            return super().run(names, feeds)

    runner = Watched(plain, 0, max_graphs, capture_after=capture_after, device="cpu")
    runner.captures, runner.runs, runner.started = [], [], threading.Event()
    return runner


def test_a_new_shape_runs_uncaptured_at_once_and_is_captured_between_passes(english, harness):
    """A shape's sightings run uncaptured inside their pass (no capture there); on the sighting
    the policy names it is captured by the executor thread while the queue is empty, reported
    through `on_capture` (the metrics count it), and later passes replay it with the same answers."""
    from app.metrics import Metrics

    h = harness([english[1]])
    slot = h.slot("english")
    metrics, reported = Metrics(), []

    def on_capture(s, seconds):
        reported.append((s, seconds))
        metrics.observe_captures(s.name, 1, seconds)

    h.executor._on_capture = on_capture
    h.executor.captures.share = 1.0  # no rest between captures: the test sees them at once
    slot.session = runner = _watched(h.executor, slot.session, 8, capture_after=2)
    slot.static_shapes = True
    one = {"state": CASES[0][1], "questions": {"q": {"type": "noul", "instructions": "Refund?"}}}

    async def once():
        job = h.executor.submit(slot, slot.model.prepare(one))
        return await job.future

    first = asyncio.run(once())
    second = asyncio.run(once())  # the second sighting: due, not captured in its pass
    assert runner.runs == [(False, 0), (False, 0)]
    _until(lambda: len(runner.graphs) == 1 and len(reported) == 1)
    third = asyncio.run(once())
    assert runner.runs[2] == (True, 1)  # replayed
    assert [queued for _, _, queued in runner.captures] == [0]
    assert reported[0][0] is slot and reported[0][1] > 0 and runner.capture_s == reported[0][1]
    for logits, _, _ in (second, third):
        np.testing.assert_array_equal(logits, first[0])
    text = metrics.render().decode()
    assert 'omni_cuda_graph_captures_total{model="english"} 1.0' in text
    assert 'omni_cuda_graph_capture_seconds_total{model="english"}' in text


def test_a_request_arriving_while_shapes_are_captured_waits_for_one_capture_at_most(english, harness):
    """With many shapes due (all of a model's listed shapes, none captured at load), the executor
    captures only while its queue is empty, one at a time: requests that arrive meanwhile are each
    dispatched before a second capture ends, and get the plain session's answers."""
    from app.runtime.batching import BatchPolicy

    h = harness([english[1]], cuda_graph_rows=4)
    slot = h.slot("english")
    plain = slot.session
    h.executor.captures.share = 1.0
    runner = _watched(h.executor, plain, 64, delay=0.15)
    count, _ = BatchPolicy(max_rows=256, max_tokens=1 << 17, graph_rows=4).precapture(runner, slot.model, 0.0)
    due = len(runner.pending)
    assert count == 0 and runner.graphs == {} and due > 10
    bodies = [{"state": s, "questions": q} for _, s, q in CASES[:4]]

    async def arrive(body, after):
        await asyncio.sleep(after)
        job = h.executor.submit(slot, slot.model.prepare(body))
        return job, slot.model.finish(job.prepared, await job.future, "reference", "english")

    want = [asyncio.run(arrive(b, 0))[1] for b in bodies]  # the plain session's answers
    slot.session, slot.static_shapes = runner, True

    async def main():
        await asyncio.to_thread(runner.started.wait, 10)  # a capture is in flight
        return await asyncio.gather(*(arrive(b, 0.2 * i) for i, b in enumerate(bodies)))

    served = asyncio.run(main())
    assert len(runner.captures) < due  # still capturing: the requests came meanwhile
    for (job, got), ref in zip(served, want):
        waited_for = [(t0, t1) for t0, t1, _ in runner.captures if t0 < job.dispatched and t1 > job.enqueued]
        assert len(waited_for) <= 1, (job.enqueued, job.dispatched, waited_for)
        _same_answers(got, ref)
    assert all(queued == 0 for _, _, queued in runner.captures)


def test_once_the_graph_budget_is_spent_new_shapes_run_unpadded(english, harness):
    """With every graph slot taken, a batch whose bucketed shape is not captured runs at its own
    shape (no filler rows), while a captured shape still replays padded; answers unchanged."""
    from app.runtime.sessions import GraphRunner

    h = harness([english[1]])
    slot = h.slot("english")
    plain = slot.session
    slot.session, slot.static_shapes = GraphRunner(plain, 0, 1, capture_after=1, device="cpu"), True
    one = {"state": CASES[0][1], "questions": {"q": {"type": "noul", "instructions": "Refund?"}}}

    async def batch(n):
        with h.executor._cv:  # queued together: one batch of n rows
            jobs = [h.executor.submit(slot, slot.model.prepare(one)) for _ in range(n)]
        outs = [await j.future for j in jobs]
        return jobs[0].batch, outs

    h.executor.captures.share = 1.0
    first, a = asyncio.run(batch(3))  # bucket 4: due, and captured between passes
    _until(lambda: len(slot.session.graphs) == 1)  # it took the one graph slot
    second, b = asyncio.run(batch(5))  # bucket 8: budget spent, so 5 rows as they are
    third, c = asyncio.run(batch(3))  # bucket 4 again: replayed
    assert (first.rows, second.rows, third.rows) == (4, 5, 4)
    assert len(slot.session.graphs) == 1
    for outs in (b, c):
        np.testing.assert_allclose(outs[0][0][:, :2], a[0][0][:, :2], atol=1e-6, rtol=0)  # 2 real columns


def test_non_finite_outputs_fail_the_request(pipeline_english):
    from models.errors import InferenceFailed as Failed

    body = {"state": "x", "questions": {"q": {"type": "noul", "instructions": "ok?"}}}
    model = pipeline_english.model
    p = model.prepare(body)
    packed = model.adapter.pack([p.work])
    logits, act_logits = pipeline_english.session.run(None, packed.feeds)
    logits = logits.copy()
    logits[0, 0] = np.nan
    (output,) = model.adapter.unpack([logits, act_logits], [p.work], packed)
    with pytest.raises(Failed):
        model.finish(p, output, "reference", "english")


def test_a_non_finite_row_fails_only_its_own_request_in_a_batch(pipeline_english):
    """The adapter calibrates the whole batch at once; a NaN in one request's row still fails
    that request alone, and its neighbours' answers are what they are unbatched."""
    from models.errors import InferenceFailed as Failed

    model, session = pipeline_english.model, pipeline_english.session
    bodies = [{"state": s, "questions": q} for _, s, q in CASES[:3]]
    prepared = [model.prepare(b) for b in bodies]
    works = [p.work for p in prepared]
    packed = model.adapter.pack(works)
    logits, act_logits = session.run(None, packed.feeds)
    logits = logits.copy()
    logits[len(works[0]), 0] = np.nan  # the second request's first question
    out = model.adapter.unpack([logits, act_logits], works, packed)
    with pytest.raises(Failed):
        model.finish(prepared[1], out[1], "reference", "english")
    for i in (0, 2):
        got = model.finish(prepared[i], out[i], "reference", "english")
        assert got["answers"] == pipeline_english(bodies[i])["answers"]


def test_bucketed_length_multiple_shrinks_as_rows_grow():
    """Length buckets: 64 tokens up to 4 rows; beyond, ~256 padded tokens a pass or 1/8 of the
    longest row, whichever is more; never finer than the adapter's own multiple."""
    from models.laya.adapter import LayaAdapter, static_multiple

    assert [static_multiple(r, 92, 16) for r in (1, 2, 4, 8, 16, 32)] == [64, 64, 64, 32, 16, 16]
    assert [static_multiple(16, n, 16) for n in (92, 200, 300, 512)] == [16, 16, 32, 64]
    # Every row bucket gets a power-of-two multiple: 12 rows once got 256 // 12 = 21, a 12 x 63
    # shape slower on the H200 than 16 x 48 (3.30 against 2.82 ms).
    from models.laya.adapter import static_rows

    for rows in {static_rows(n) for n in range(1, 65)}:
        for longest in (16, 48, 92, 300, 512):
            m = static_multiple(rows, longest, 16)
            assert m & (m - 1) == 0 and 16 <= m <= 64, (rows, longest, m)
    assert static_multiple(12, 48, 16) == 16
    assert static_multiple(300, 48, 16) == 16  # more rows than the padding budget's tokens
    adapter = LayaAdapter(pad_id=0, calibration={}, pad_to=16)
    assert adapter.padded_length(92, static_multiple(1, 92, 16)) == 128
    assert adapter.padded_length(92, static_multiple(16, 92, 16)) == 96
    assert adapter.padded_length(500, static_multiple(1, 500, 16)) == 512  # capped at max_len


def test_row_buckets_are_powers_of_two_then_small_steps():
    """Past 8 rows a bucket is the next multiple of 4 (of 8 past 32): at most 3 filler rows
    where c=16 and c=64 passes fall (a 10-row pass is captured at 12, a 22-row one at 24), and
    14 row buckets up to 64."""
    from models.laya.adapter import static_rows

    assert [static_rows(n) for n in (1, 2, 3, 5, 8, 9, 10, 16, 17, 22, 25, 32, 33, 57, 64)] == [
        1,
        2,
        4,
        8,
        8,
        12,
        12,
        16,
        20,
        24,
        28,
        32,
        40,
        64,
        64,
    ]
    assert sorted({static_rows(n) for n in range(1, 65)}) == [1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64]
    assert all(0 <= static_rows(n) - n < (4 if n <= 32 else 8) for n in range(9, 200))


def test_laya_captures_up_to_the_row_bound_within_its_token_bound():
    """Laya's policy: every batch of at most 16 rows (of up to 512 tokens) is captured, as
    before; larger ones are captured up to the row bound while launch-bound, and run at their
    own shape once rows × longest passes 16 × 512."""
    from app.config import Settings
    from app.runtime.batching import BatchPolicy
    from models.laya.served import LayaModel

    policy, bound = BatchPolicy.from_settings(Settings()), LayaModel.cuda_graphs
    assert policy.graph_rows == 64 and bound.max_tokens == 16 * 512
    for n, longest, captured in (
        (1, 48, True),
        (16, 512, True),
        (22, 48, True),
        (64, 128, True),
        (64, 129, False),
        (24, 400, False),
        (65, 16, False),
    ):
        assert policy.captures(bound, n, n * longest) is captured, (n, longest)


def test_the_shapes_laya_captures_as_it_loads_are_every_shape_a_pass_can_take(english):
    """LayaAdapter.capture_batches lists each bucketed shape once, fewest tokens first, and
    exactly the shapes that batches of any row count up to the row bound and any length take
    when the policy captures them; questions of 2 to 8 options share one marker-column bucket."""
    from app.runtime.batching import BatchPolicy
    from models.laya.prepare import Row

    model = load(english[1])
    adapter, bound = model.adapter, model.cuda_graphs.max_tokens
    rows_bound = 20  # all five step sizes, and fast enough

    def shape(works):
        return adapter.pack(works, static=True).feeds["input_ids"].shape

    listed = [shape(works) for works in adapter.capture_batches(rows_bound, bound)]
    assert len(listed) == len(set(listed))
    assert [r * n for r, n in listed] == sorted(r * n for r, n in listed)

    policy = BatchPolicy(max_rows=256, max_tokens=1 << 20, graph_rows=rows_bound)
    reached = set()
    for n in range(1, rows_bound + 1):
        for length in range(1, adapter.max_len + 1):
            if policy.captures(model.cuda_graphs, n, n * length):
                reached.add(shape([[Row([1] * length, [0], 0)] for _ in range(n)]))
    assert reached == set(listed)
    columns = {
        adapter.pack([[Row([1] * 30, list(range(k)), 0)]], static=True).feeds["marker_pos"].shape[1]
        for k in range(1, 9)
    }
    assert columns == {8}


def test_the_default_graph_budget_holds_every_shape_of_each_laya_variant():
    """english rows are at most 512 tokens (218 shapes), multilingual and typed-decisions 1,024
    (259): the default budget captures them all as the model loads."""
    from app.config import Settings
    from models.laya.adapter import LayaAdapter
    from models.laya.served import LayaModel

    s = Settings()
    counts = [
        len(LayaAdapter(0, {}, max_len=n).capture_batches(s.cuda_graph_rows, LayaModel.cuda_graphs.max_tokens))
        for n in (512, 1024)
    ]
    assert counts == [218, 259] and max(counts) <= s.cuda_graphs


@pytest.fixture
def graph_sessions(monkeypatch):
    """Sessions the executor creates become GraphRunners on the CPU (the bookkeeping of CUDA
    graphs, no CUDA) with a budget of 7; the list of those made."""
    from app.runtime import sessions

    plain, made = sessions.create, []

    def with_graphs(path, device="auto", *args, **kwargs):
        info = plain(path, "cpu")
        made.append(sessions.GraphRunner(info.session, 0, 7, device="cpu"))
        return sessions.SessionInfo(made[-1], "cpu", info.provider, info.runtime, static_shapes=True)

    monkeypatch.setattr(sessions, "create", with_graphs)
    return made


def test_a_session_that_captures_as_it_loads_serves_without_capturing(english, harness, graph_sessions):
    """With precapture on, the executor captures the adapter's shapes before the model warms up
    (a GraphRunner on the CPU here: the same bookkeeping, no CUDA), up to the graph budget; a
    request then finds its shape captured, and its answers are the plain session's."""
    from app.runtime import sessions
    from app.runtime.batching import BatchPolicy

    made = graph_sessions
    h = harness([english[1]], cuda_graph_rows=4)
    slot = h.slot("english")
    assert slot.session is made[0] and len(made[0].graphs) == 7  # the budget, then it stopped
    assert made[0].pending == {}
    assert slot.graphs_captured == 7 and slot.capture_s > 0 and slot.load_ms >= slot.capture_s * 1000
    every = len(slot.model.adapter.capture_batches(4, slot.model.cuda_graphs.max_tokens))
    assert every > 7
    # All of them, with a budget that holds them; fewest tokens first, so a one-row request is among.
    runner = sessions.GraphRunner(made[0].session, 0, 64, device="cpu")  # the same plain session
    count, took = BatchPolicy(max_rows=256, max_tokens=1 << 17, graph_rows=4).precapture(runner, slot.model)
    assert count == every == len(runner.graphs) and took > 0 and runner.pending == {}
    slot.session = runner
    one = {"state": CASES[0][1], "questions": {"q": {"type": "noul", "instructions": "Refund?"}}}

    async def once():
        job = h.executor.submit(slot, slot.model.prepare(one))
        return job, await job.future

    job, (logits, act, _) = asyncio.run(once())
    assert len(runner.graphs) == every and runner.sightings == {}  # replayed: nothing counted
    feeds = slot.model.adapter.pack([job.prepared.work]).feeds
    np.testing.assert_allclose(logits[:, :2], runner.session.run(None, feeds)[0][:1, :2], atol=1e-6, rtol=0)


def test_precapture_stops_at_its_time_budget_and_leaves_the_rest_due(english, monkeypatch):
    """Past its seconds, precapture begins no more captures: the listed shapes left become
    candidates, in the listed order (fewest tokens first), captured when the executor is idle."""
    import itertools
    import types

    from app.runtime import batching, sessions
    from app.runtime.batching import BatchPolicy

    model = load(english[1])
    plain = sessions.create(model.onnx_path, "cpu").session
    listed = [
        sessions.GraphRunner.shape_key(model.adapter.pack(works, static=True).feeds)
        for works in model.adapter.capture_batches(4, model.cuda_graphs.max_tokens)
    ]
    policy = BatchPolicy(max_rows=256, max_tokens=1 << 17, graph_rows=4)
    runner = sessions.GraphRunner(plain, 0, 64, device="cpu")
    assert policy.precapture(runner, model, 0.0)[0] == 0 and list(runner.pending) == listed
    runner = sessions.GraphRunner(plain, 0, 64, device="cpu")
    clock = itertools.count()  # a second passes at each look at the clock
    monkeypatch.setattr(batching, "time", types.SimpleNamespace(perf_counter=lambda: float(next(clock))))
    count, took = policy.precapture(runner, model, 2.5)  # two looks, two captures, then none
    assert count == 2 and list(runner.graphs) == listed[:2] and list(runner.pending) == listed[2:]


def test_precapture_off_leaves_every_listed_shape_to_idle_capture(english, harness, graph_sessions):
    h = harness([english[1]], cuda_graph_rows=4, cuda_graph_precapture=False)
    h.executor.captures.share = 1.0
    assert h.slot("english").graphs_captured == 0
    _until(lambda: len(graph_sessions[0].graphs) == 7)  # captured while idle, up to the budget
    assert graph_sessions[0].pending == {}


def test_bucketed_shapes_change_no_answer(pipeline_english):
    """The static (CUDA-graph) layout pads rows, length and marker columns to buckets; filler
    rows and columns never change a real row's numbers."""
    from models.laya.adapter import static_multiple, static_rows

    bodies = [{"state": s, "questions": q} for _, s, q in CASES[:7]]
    model, session = pipeline_english.model, pipeline_english.session
    prepared = [model.prepare(b) for b in bodies]
    works = [p.work for p in prepared]
    plain = model.adapter.pack(works)
    static = model.adapter.pack(works, static=True)
    n = sum(len(w) for w in works)
    ids = static.feeds["input_ids"]
    longest = max(len(r.ids) for w in works for r in w)
    assert ids.shape[0] == static_rows(n) > n and ids.shape[1] % static_multiple(ids.shape[0], longest, 16) == 0
    assert static.feeds["marker_mask"].shape[1] in (2, 4, 8, 16, 32)
    assert static.real_tokens == plain.real_tokens
    a = model.adapter.unpack(session.run(None, plain.feeds), works, plain)
    b = model.adapter.unpack(session.run(None, static.feeds), works, static)
    calib = model.calibration
    for p, (la, aa, _), (lb, ab, _) in zip(prepared, a, b):
        for row, r in enumerate(p.work):
            k, t = len(r.markers), calib["temperature"][r.qtype]
            np.testing.assert_allclose(softmax_row(la[row, :k], t), softmax_row(lb[row, :k], t), atol=1e-6, rtol=0)
        np.testing.assert_allclose(aa, ab, atol=1e-5, rtol=0)


def test_a_bucket_padded_pass_of_mixed_question_types_with_one_option_count(english, harness):
    """Three questions of 3 options each (choice, score, choice) make 3 rows, padded to a bucket
    of 4 on every device: the filler row must not reach calibration, whose temperatures are per
    real row."""
    h = harness([english[1]])
    slot = h.slot("english")
    assert slot.bucketed and not slot.static_shapes  # the CPU pads as a GPU replays
    body = {
        "state": CASES[0][1],
        "questions": {
            "a": {"type": "choice", "instructions": "Which?", "criteria": {"x": "X", "y": "Y", "z": "Z"}},
            "b": {"type": "score", "instructions": "How much?", "criteria": ["low", "mid", "high"]},
            "c": {"type": "choice", "instructions": "Which else?", "criteria": {"p": "P", "q": "Q", "r": "R"}},
        },
    }

    async def once():
        job = h.executor.submit(slot, slot.model.prepare(body))
        return job, await job.future

    job, output = asyncio.run(once())
    assert job.batch.rows == 4 and job.batch.size == 1  # the filler row was there
    answers = slot.model.finish(job.prepared, output, "reference", "english")["answers"]
    assert list(answers) == ["a", "b", "c"]
    assert slot.state is SlotState.WARMING
