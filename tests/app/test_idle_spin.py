"""The executor thread's bounded spin before it sleeps (app/runtime/idle_spin.py)."""
from __future__ import annotations

import asyncio
import threading
import time

from app.runtime import idle_spin
from tests.app.test_executor import harness  # noqa: F401  (the fixture)
from tests.models.laya.cases import CASES


def test_the_spin_ends_when_work_arrives():
    flag = threading.Event()
    threading.Timer(0.05, flag.set).start()
    assert idle_spin.spin(flag.is_set, 30.0) is True
    assert flag.is_set()


def test_the_spin_ends_at_its_bound():
    t0 = time.perf_counter()
    assert idle_spin.spin(lambda: False, 0.02) is False
    assert time.perf_counter() - t0 >= 0.02


def test_the_spin_leaves_the_gil_to_other_threads():
    """Another thread counts in pure Python while the spin runs: it must get most of the GIL, as
    with nothing beside it (a pure-Python spin would take about half). Counts, not a timing."""
    def count(out, stop):
        n = 0
        while not stop.is_set():
            n += 1
        out.append(n)

    def beside(work):
        out, stop = [], threading.Event()
        t = threading.Thread(target=count, args=(out, stop))
        t.start()
        work()
        stop.set()
        t.join()
        return out[0]

    def busy_python():
        end = time.perf_counter() + 0.3
        while time.perf_counter() < end:
            pass

    alone = beside(lambda: time.sleep(0.3))
    spun = beside(lambda: idle_spin.spin(lambda: False, 0.3))
    python = beside(busy_python)
    assert spun > 0.75 * alone
    assert spun > 1.3 * python


def test_a_spinning_executor_serves_and_sleeps_after_its_bound(english, harness):
    h = harness([english[1]], executor_spin_us=20_000)
    slot = h.slot("english")
    body = {"state": CASES[0][1], "questions": CASES[0][2]}

    async def one():
        job = h.executor.submit(slot, slot.model.prepare(body))
        return job, await job.future

    first, _ = asyncio.run(one())
    time.sleep(0.05)                            # past the bound: the thread sleeps in wait()
    second, out = asyncio.run(one())
    assert first.batch is not None and second.batch is not None and out is not None
    assert h.executor._thread.is_alive()
    h.executor.stop()
    assert not h.executor._thread.is_alive()    # a spinning or sleeping thread both see the stop
