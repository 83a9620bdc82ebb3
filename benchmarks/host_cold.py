"""What a request's host steps cost on a thread that slept through the pass, against back to back.

At c=1 every host step of a request (prepare on the event loop, pack and unpack on the executor,
finish back on the loop) runs on a thread that has just woken: the loop slept while the GPU ran
the pass. This times each step of one export's own code over a workload, back to back and after
a sleep as long as the pass (`--sleep-ms`), in-process on ONNX Runtime's CPU provider (the
outputs only feed unpack and finish; their timings do not depend on the device):

    python -m benchmarks.host_cold --export exports/cua-s1 --workload benchmarks/workloads/cua_218.jsonl \\
        --sleep-ms 6.5 --out host_cold.json

Prints and writes the median µs of each step either way and their ratio. `--wait yield` spends
the wait in `os.sched_yield()` calls instead of a sleep: the thread stays runnable, its core
never idles, and what is left of the ratio is what other code does to the caches meanwhile.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

STEPS = ("prepare", "pack", "unpack", "finish")


def _wait(seconds: float, how: str) -> None:
    if how == "sleep":
        time.sleep(seconds)
        return
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        os.sched_yield()


def _median_us(step, count: int, sleep_s: float, wait: str = "sleep") -> float:
    times = []
    for i in range(count):
        if sleep_s:
            _wait(sleep_s, wait)
        t0 = time.perf_counter()
        step(i)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def measure(export: str, bodies: list[dict], iters: int, sleep_ms: float, profile: str = "reference",
            wait: str = "sleep") -> dict:
    import onnxruntime as ort

    from models.registry import load

    model = load(export)
    session = ort.InferenceSession(model.onnx_path, providers=["CPUExecutionProvider"])
    adapter = model.adapter
    prepared = [model.prepare(b) for b in bodies]
    packs, raws, outputs = [], [], []
    for p in prepared:                      # one request a pass, as at c=1
        packed = adapter.pack([p.work])
        raw = (session.run(None, packed.feeds) if packed.parts is None
               else [session.run(None, feeds) for feeds in packed.parts])
        packs.append(packed)
        raws.append(raw)
        outputs.append(adapter.unpack(raw, [p.work], packed)[0])
    n = len(bodies)
    steps = {
        "prepare": lambda i: model.prepare(bodies[i % n]),
        "pack": lambda i: adapter.pack([prepared[i % n].work]),
        "unpack": lambda i: adapter.unpack(raws[i % n], [prepared[i % n].work], packs[i % n]),
        "finish": lambda i: model.finish(prepared[i % n], outputs[i % n], profile, model.name),
    }
    report = {"export": export, "model": model.name, "requests": n, "iters": iters, "sleep_ms": sleep_ms,
              "wait": wait, "back_to_back_us": {}, "after_sleep_us": {}, "ratio": {}}
    for name in STEPS:
        warm = _median_us(steps[name], iters, 0.0)
        cold = _median_us(steps[name], iters, sleep_ms / 1000.0, wait)
        report["back_to_back_us"][name] = round(warm, 1)
        report["after_sleep_us"][name] = round(cold, 1)
        report["ratio"][name] = round(cold / warm, 2) if warm > 0 else None
    return report


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--export", required=True)
    ap.add_argument("--workload", required=True, help="JSONL of request bodies")
    ap.add_argument("--iters", type=int, default=300, help="timed calls of each step, either way")
    ap.add_argument("--sleep-ms", type=float, default=5.0, help="the sleep before each cold call")
    ap.add_argument("--wait", choices=("sleep", "yield"), default="sleep",
                    help="how the thread waits: asleep, or runnable in sched_yield calls")
    ap.add_argument("--profile", default="reference")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    with open(args.workload, encoding="utf-8") as f:
        bodies = [json.loads(line) for line in f if line.strip()]
    report = measure(args.export, bodies, args.iters, args.sleep_ms, args.profile, args.wait)
    for name in STEPS:
        print("%-8s back to back %8.1f µs   after %.1f ms (%s) %8.1f µs   x%.2f"
              % (name, report["back_to_back_us"][name], args.sleep_ms, args.wait,
                 report["after_sleep_us"][name], report["ratio"][name] or 0.0))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    return report


if __name__ == "__main__":
    main()
