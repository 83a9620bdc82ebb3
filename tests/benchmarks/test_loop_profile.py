"""benchmarks.loop_profile's summary of py-spy raw samples: per thread, and the loop thread's
functions inclusive and as leaves."""

from __future__ import annotations

from benchmarks.loop_profile import summarize

LOOP = "thread (11): MainThread;BaseEventLoop.run_forever (base_events.py:607);"
# py-spy's raw lines, one a stack: frames joined by ";", then the sample count.
RAW = "".join(
    [
        LOOP + "BaseEventLoop._run_once (base_events.py:1922);decide (serving.py:118);prepare (served.py:31) 6\n",
        LOOP + "BaseEventLoop._run_once (base_events.py:1922);decide (serving.py:146);finish (served.py:42) 3\n",
        LOOP + "BaseEventLoop._run_once (base_events.py:1884);EpollSelector.select (selectors.py:468) 1\n",
        "thread (12): omni-executor;_run (executor.py:120);_execute (executor.py:205) 10\n",
    ]
)


def test_shares_are_of_the_loop_threads_samples():
    report = summarize(RAW.splitlines())
    assert report["threads"] == {"thread (11): MainThread": 10, "thread (12): omni-executor": 10}
    assert report["samples"] == 10
    inclusive = dict(report["inclusive_pct"])
    # Two lines of `decide` are one function; a caller counts what its callees do; the frames
    # down to the loop's dispatch are left out.
    assert inclusive["decide (serving.py)"] == 90.0 and "run_forever (base_events.py)" not in inclusive
    assert dict(report["leaf_pct"]) == {
        "prepare (served.py)": 60.0,
        "finish (served.py)": 30.0,
        "EpollSelector.select (selectors.py)": 10.0,
    }
    assert report["idle_pct"] == 10.0
    assert "_execute (executor.py)" not in inclusive  # another thread's samples stay out


def test_cpu_per_request_reads_each_threads_time(monkeypatch):
    """A thread that burns 0.3 s of CPU while the server answered 10 requests costs ~30 ms a
    request, and it is counted apart from the main (event-loop) thread."""
    import os
    import threading

    from benchmarks import loop_profile

    served = iter([100.0, 110.0])
    monkeypatch.setattr(loop_profile, "_served", lambda url: next(served))
    stop, tid = threading.Event(), []

    def spin():
        tid.append(threading.get_native_id())
        while not stop.is_set():
            pass

    t = threading.Thread(target=spin)
    t.start()
    try:
        cost = loop_profile.cpu_per_request(os.getpid(), "http://unused", 0.3)
    finally:
        stop.set()
        t.join()
    assert cost["requests"] == 10
    # The spinning thread is busy for the whole window (which stretches when the machine is
    # loaded: the sleeping main thread must get the GIL back to end it), so its CPU time is most
    # of the window and never more; clock ticks are 10 ms. Its time is its own, reported per
    # request, and counted with the other threads, not the main (loop) thread.
    spun = [us for name, us in cost["threads_us"].items() if name.endswith("/%d" % tid[0])]
    assert len(spun) == 1
    spun_s = spun[0] * cost["requests"] / 1e6
    assert 0.05 <= spun_s <= cost["seconds"] + 0.02, (spun_s, cost["seconds"])
    assert cost["others_us"] >= spun[0] and cost["loop_us"] < spun[0]
    assert abs(cost["total_us"] - cost["loop_us"] - cost["others_us"]) < 0.2
    # The host over the window: the spinner alone keeps one of its cores busy most of the time.
    assert 50.0 / os.cpu_count() <= cost["host"]["busy_pct"] <= 100.0
    assert 0.0 <= cost["host"]["steal_pct"] <= 100.0


def test_a_loop_in_c_is_cut_below_the_frames_every_sample_shares():
    """uvloop has no Python `_run_once`: the frames all samples share (Granian's CLI down to the
    worker's run_forever call) are left out instead; an idle sample keeps its last frame."""
    raw = (
        "thread (11): MainThread;cli (cli.py:1);serve (mp.py:2);decide (serving.py:118);prepare (served.py:31) 6\n"
        "thread (11): MainThread;cli (cli.py:1);serve (mp.py:2);decide (serving.py:146) 3\n"
        "thread (11): MainThread;cli (cli.py:1);serve (mp.py:2) 1\n"
    )
    report = summarize(raw.splitlines())
    inclusive = dict(report["inclusive_pct"])
    assert inclusive == {"decide (serving.py)": 90.0, "prepare (served.py)": 60.0, "serve (mp.py)": 10.0}
    assert dict(report["leaf_pct"]) == {"prepare (served.py)": 60.0, "decide (serving.py)": 30.0, "serve (mp.py)": 10.0}


def test_stacks_that_start_part_way_down_are_kept_whole():
    raw = (
        "thread (11): MainThread;cli (cli.py:1);serve (mp.py:2);decide (serving.py:118);prepare (served.py:31) 6\n"
        "thread (11): MainThread;cli (cli.py:1);serve (mp.py:2);decide (serving.py:146) 2\n"
        "thread (11): MainThread;cli (cli.py:1);serve (mp.py:2) 1\n"
        "thread (11): MainThread;decide (serving.py:146);finish (served.py:42) 1\n"
    )
    report = summarize(raw.splitlines())
    assert dict(report["inclusive_pct"]) == {
        "decide (serving.py)": 90.0,
        "prepare (served.py)": 60.0,
        "serve (mp.py)": 10.0,
        "finish (served.py)": 10.0,
    }
