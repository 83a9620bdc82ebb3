"""How a waiting request learns why its job's future was cancelled (app/serving.py): the
disconnect watcher and the deadline each cancel the future and say which."""

from __future__ import annotations

import asyncio

from app.middleware import request_id
from app.runtime.executor import Job
from app import serving
from app.serving import _abandon, _expire, _Guard
import contextlib


def _job(loop) -> Job:
    return Job(slot=None, prepared=None, future=loop.create_future(), loop=loop)


def test_a_disconnect_cancels_the_job_and_says_so():
    async def main():
        loop = asyncio.get_running_loop()
        job = _job(loop)

        async def gone():  # the client's disconnect arrives at once
            return None

        watch = loop.create_task(gone())
        watch.add_done_callback(lambda w: _abandon(job, w))
        with contextlib.suppress(asyncio.CancelledError):
            await job.future
        return job

    job = asyncio.run(main())
    assert job.cancelled and job.outcome == "gone"


def test_a_watcher_called_off_leaves_the_answer_alone():
    async def main():
        loop = asyncio.get_running_loop()
        job = _job(loop)
        watch = loop.create_task(asyncio.sleep(3600))
        watch.add_done_callback(lambda w: _abandon(job, w))
        loop.call_soon(job.future.set_result, "answer")
        result = await job.future
        watch.cancel()
        await asyncio.sleep(0)
        return job, result

    job, result = asyncio.run(main())
    assert result == "answer" and job.outcome == ""


def test_the_deadline_cancels_only_unanswered_jobs():
    async def main():
        loop = asyncio.get_running_loop()
        late, answered = _job(loop), _job(loop)
        answered.future.set_result(1)
        _expire(late)
        _expire(answered)
        return late, answered

    late, answered = asyncio.run(main())
    assert late.future.cancelled() and late.outcome == "expired"
    assert answered.future.result() == 1 and answered.outcome == ""


def test_generated_request_ids_are_unique_hex():
    ids = [request_id({}) for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    assert request_id({"x-request-id": "client-1"}) == "client-1"
    assert len(request_id({"x-request-id": "has space"})) == 32  # not printable ASCII: a new one


def _guarded(
    dispatch_after: float | None,
    gone_after: float,
    budget_s: float | None,
    wait: float = 0.05,
    watch_after_s: float = 0.001,
):
    """A job under a _Guard: the executor dispatches it after `dispatch_after` s (None: never)
    and the client leaves after `gone_after` s; returns the job, whether a watcher was started,
    and whether the client's receive() was ever called."""
    calls = []

    async def main():
        loop = asyncio.get_running_loop()
        job = _job(loop)

        async def disconnected():
            calls.append(loop.time())
            await asyncio.sleep(gone_after)

        if dispatch_after is not None:
            loop.call_later(dispatch_after, setattr, job, "dispatched", 1.0)
        guard = _Guard(job, disconnected, budget_s, watch_after_s)
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(job.future), wait)
        watched = guard.watch is not None
        guard.cancel()
        return job, watched

    job, watched = asyncio.run(main())
    return job, watched, bool(calls)


def test_a_job_dispatched_at_once_is_never_watched():
    job, watched, received = _guarded(dispatch_after=0.0, gone_after=0.0, budget_s=None)
    assert not watched and not received and job.outcome == "" and not job.cancelled


def test_a_job_still_queued_is_watched_and_a_disconnect_drops_it():
    job, watched, received = _guarded(dispatch_after=None, gone_after=0.005, budget_s=None)
    assert watched and received
    assert job.cancelled and job.outcome == "gone"


def test_the_watch_starts_only_after_its_delay():
    """A job queued for less than the watch delay is not watched, whatever the client does."""
    job, watched, received = _guarded(dispatch_after=None, gone_after=0.0, budget_s=None, watch_after_s=10.0)
    assert not watched and not received and not job.cancelled
    job, watched, received = _guarded(dispatch_after=None, gone_after=0.0, budget_s=None, watch_after_s=0.0)
    assert watched and received and job.outcome == "gone"
    assert serving.WATCH_AFTER_S == 0.01


def test_the_deadline_follows_the_watch_and_ends_a_job_still_waiting():
    job, watched, _ = _guarded(dispatch_after=None, gone_after=3600, budget_s=0.005)
    assert watched and job.cancelled and job.outcome == "expired"
    job, watched, received = _guarded(dispatch_after=None, gone_after=3600, budget_s=0.0005)
    assert not watched and not received and job.outcome == "expired"  # the deadline came first


def test_a_called_off_guard_lets_go_of_its_request():
    """rloop keeps a cancelled timer's callback alive: the guard's `_fire` may outlive the request,
    so calling the guard off drops the job, its watcher and the client's receive, and a late
    `_fire` does nothing."""
    import gc
    import weakref

    async def main():
        loop = asyncio.get_running_loop()
        job = _job(loop)

        async def disconnected():
            await asyncio.sleep(3600)

        guard = _Guard(job, disconnected, 30.0, watch_after_s=0.0)
        await asyncio.sleep(0.01)  # the watch has started; the deadline timer is set
        assert guard.watch is not None and guard.handle is not None
        kept = guard._fire  # what such a loop holds after the cancel
        watch, alive = guard.watch, weakref.ref(job)
        job.future.set_result("answer")
        guard.cancel()
        for _ in range(3):  # the watcher's cancellation and its done callback run
            await asyncio.sleep(0)
        assert watch.cancelled()
        assert guard.job is guard.watch is guard.disconnected is guard.handle is None
        del job, watch
        gc.collect()
        assert alive() is None  # nothing of the request is left through `kept`
        kept()  # a late firing is harmless

    asyncio.run(main())


def test_rloop_is_named_at_start():
    """Granian's `auto` loop is rloop wherever rloop is installed; the engine says what that costs."""
    rloop_like = type("RLoop", (), {"__module__": "rloop.loop"})()
    note = serving.loop_warning(rloop_like, 30.0)
    assert note.startswith("serving on rloop") and "deadline (30 s)" in note and "GRANIAN_LOOP=uvloop" in note
    assert serving.loop_warning(asyncio.new_event_loop(), 30.0) is None
