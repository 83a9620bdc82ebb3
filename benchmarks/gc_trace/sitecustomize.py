"""Logs each full collection of Python's garbage collector in every Python process started with
this folder on PYTHONPATH and GC_TRACE_LOG set (a path; `.PID` is appended): its pause, what it
collected, and how many objects the oldest generation held as it started, with their commonest
types. For finding what a server's full collections walk (docs/benchmarks.md, cudasync session):

    GC_TRACE_LOG=/tmp/gc PYTHONPATH=benchmarks/gc_trace:$PYTHONPATH python -m app.launch
"""
import collections
import gc
import os
import time

_PATH = os.environ.get("GC_TRACE_LOG")
_state = {}


def _callback(phase, info):
    if info.get("generation") != 2:
        return
    if phase == "start":
        objects = gc.get_objects(2)
        _state["objects"] = len(objects)
        _state["types"] = collections.Counter(type(o).__name__ for o in objects).most_common(10)
        del objects
        _state["t0"] = time.perf_counter()
        return
    pause = time.perf_counter() - _state.pop("t0", time.perf_counter())
    with open("%s.%d" % (_PATH, os.getpid()), "a", encoding="utf-8") as f:
        f.write("%.6f pause %.2f ms collected %s uncollectable %s gen2 %s frozen %d top %s\n" % (
            time.time(), pause * 1e3, info.get("collected"), info.get("uncollectable"), _state.get("objects"),
            gc.get_freeze_count(), _state.get("types")))


if _PATH:
    gc.callbacks.append(_callback)
