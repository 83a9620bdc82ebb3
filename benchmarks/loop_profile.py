"""Where one Granian worker's CPU goes under load: py-spy samples of a live server, summed per
thread and per function of the event loop's thread.

    python -m benchmarks.loop_profile --export EXPORT_DIR [--device cpu|cuda] [--concurrency 64]
        [--seconds 8] [--out profile.json]

Starts the server on a free loopback port (`granian --workers 1`, as served), drives the
one-question Laya workload at the given concurrency with benchmarks.load, and lets py-spy
(`pip install py-spy`; it needs ptrace rights over the server) sample every thread for
`--seconds` from the third second of load on. The report: samples per thread (the loop's
thread is `MainThread`; `omni-executor` is the executor), then the loop thread's busiest
functions, inclusive (a handler counts everything it calls) and as leaves (where the CPU was).
Samples the loop spent in `select` are idle time.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from benchmarks.local_server import ROOT, run_server


def summarize(raw_lines, thread: str = "MainThread", top: int = 40) -> dict:
    """py-spy `--format raw` lines ("thread;frame;frame... count") → samples per thread and
    the named thread's functions, inclusive and as leaves, in % of that thread's samples."""
    threads, inclusive, leaves, total = collections.Counter(), collections.Counter(), collections.Counter(), 0
    for line in raw_lines:
        line = line.strip()
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        frames, n = stack.split(";"), int(count)
        threads[frames[0]] += n
        if thread not in frames[0]:
            continue
        total += n
        names = [_name(f) for f in frames[1:]]
        # What the loop dispatches, not the frames every sample shares (granian's CLI, run_forever).
        cut = max((i for i, name in enumerate(names) if name.startswith("BaseEventLoop._run_once")), default=-1)
        names = names[cut + 1:]
        for name in set(names):
            inclusive[name] += n
        if names:
            leaves[names[-1]] += n

    def share(counter):
        return [(name, round(100.0 * n / total, 1)) for name, n in counter.most_common(top)] if total else []

    idle = sum(n for name, n in leaves.items() if name.startswith("EpollSelector.select"))
    return {"threads": dict(threads.most_common()), "thread": thread, "samples": total,
            "idle_pct": round(100.0 * idle / total, 1) if total else None,
            "inclusive_pct": share(inclusive), "leaf_pct": share(leaves)}


def _name(frame: str) -> str:
    """"func (path/to/file.py:12)" → "func (file.py)": lines of one function count together."""
    func, _, where = frame.partition(" (")
    return "%s (%s)" % (func, os.path.basename(where.rsplit(":", 1)[0])) if where else func


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--workload", default=os.path.join(ROOT, "benchmarks/workloads/laya_1q.jsonl"))
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    spy = shutil.which("py-spy")
    if spy is None:
        raise SystemExit("py-spy is not installed (pip install py-spy)")
    # The caller's OMNI_* settings apply (run_server starts from a clean OMNI_ environment).
    env = {k: v for k, v in os.environ.items() if k.startswith("OMNI_")}
    env.update(OMNI_MODELS=args.export, OMNI_DEVICE=args.device, OTEL_SDK_DISABLED="true")
    with tempfile.TemporaryDirectory() as tmp, run_server(pathlib.Path(tmp), env, timeout=180) as server:
        worker = _worker_pid(server.proc.pid)
        # Enough requests to outlast the sampling window at any plausible rate.
        requests = max(2000, int(args.concurrency * 400 * args.seconds))
        load = subprocess.Popen([sys.executable, "-m", "benchmarks.load", "--url", server.url,
                                 "--workload", args.workload, "--concurrency", str(args.concurrency),
                                 "--requests", str(requests), "--procs", "1"], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(3.0)
            raw = os.path.join(tmp, "raw.txt")
            done = subprocess.run([spy, "record", "-p", str(worker), "-d", str(int(args.seconds)), "-r", str(args.rate),
                                   "--threads", "--nonblocking", "-f", "raw", "-o", raw],
                                  capture_output=True, text=True)
            if done.returncode != 0 or not os.path.exists(raw):
                raise SystemExit("py-spy failed (ptrace rights?): %s" % (done.stderr or done.stdout)[-400:])
            with open(raw, encoding="utf-8") as f:
                report = summarize(f, top=args.top)
        finally:
            load.kill()
    report.update(export=args.export, device=args.device, concurrency=args.concurrency, seconds=args.seconds)
    print("samples per thread: %s; the loop idle (select) in %s%% of its samples"
          % (report["threads"], report["idle_pct"]))
    print("%s, inclusive:" % report["thread"])
    for name, pct in report["inclusive_pct"]:
        print("  %5.1f%%  %s" % (pct, name))
    print("%s, leaves:" % report["thread"])
    for name, pct in report["leaf_pct"][:20]:
        print("  %5.1f%%  %s" % (pct, name))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)
    return 0


def _worker_pid(parent: int) -> int:
    """Granian serves from a child process of the one started; that child is what to sample."""
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            with open("/proc/%d/task/%d/children" % (parent, parent)) as f:
                children = [int(p) for p in f.read().split()]
        except OSError:
            children = []
        if children:
            return children[0]
        time.sleep(0.1)
    return parent


if __name__ == "__main__":
    sys.exit(main())
