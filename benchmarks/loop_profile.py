"""Where one Granian worker's CPU goes under load: CPU time per request of each of its threads,
and py-spy samples of the live server, summed per thread and per function of the event loop's
thread.

    python -m benchmarks.loop_profile --export EXPORT_DIR [--device cpu|cuda] [--concurrency 64]
        [--seconds 8] [--no-spy] [--out profile.json]
    python -m benchmarks.loop_profile --url http://127.0.0.1:18080 --pid GRANIAN_PID --no-spy ...

CPU per request is read from /proc (user + system time of each thread of the worker) and the
server's own request counter over the same window: the event loop's thread (the process's main
thread) at N µs a request cannot serve more than 1e6/N requests a second, whatever the device.

With --export it starts the server on a free loopback port through the product's entry point
(`python -m app.launch`, what `make serve` runs: Granian, one worker, RSGI; `--interface asgi`
runs Granian as app.launch does, through its ASGI interface); with --url and --pid it measures
a server already running. It drives the one-question Laya workload at the given concurrency
with benchmarks.load, and lets py-spy (`pip install py-spy`; it needs ptrace rights over the
server) sample every thread for `--seconds` from the third second of load on. The report:
samples per thread (the loop's thread is `MainThread`; `omni-executor` is the executor), then
the loop thread's busiest functions, inclusive (a handler counts everything it calls) and as
leaves (where the CPU was). Samples the loop spent in `select` are idle time.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from benchmarks import host_facts, scrape
from benchmarks.startup import wait_ready

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def summarize(raw_lines, thread: str = "MainThread", top: int = 40) -> dict:
    """py-spy `--format raw` lines ("thread;frame;frame... count") → samples per thread and
    the named thread's functions, inclusive and as leaves, in % of that thread's samples."""
    threads, inclusive, leaves, total = collections.Counter(), collections.Counter(), collections.Counter(), 0
    stacks = []
    for line in raw_lines:
        line = line.strip()
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue  # a frame name with a newline in it comes out over several lines
        frames, n = stack.split(";"), int(count)
        threads[frames[0]] += n
        if thread not in frames[0]:
            continue
        total += n
        names = [_name(f) for f in frames[1:]]
        # What the loop dispatches, not the frames every sample shares (granian's CLI, run_forever):
        # below asyncio's Python `_run_once`, or, where the loop is in C (uvloop), below the
        # frames the thread's full stacks have in common. (py-spy also returns some stacks that
        # start part way down, already below those frames; they are kept whole.)
        cut = max((i for i, name in enumerate(names) if name.startswith("BaseEventLoop._run_once")), default=-1)
        stacks.append((names[cut + 1 :], n, cut >= 0))
    shared = _shared_base([(names, n) for names, n, dispatched in stacks if not dispatched])
    for names, n, dispatched in stacks:
        if not dispatched and shared and names[: len(shared)] == shared:
            names = names[min(len(shared), len(names) - 1) :]
        for name in set(names):
            inclusive[name] += n
        if names:
            leaves[names[-1]] += n

    def share(counter):
        return [(name, round(100.0 * n / total, 1)) for name, n in counter.most_common(top)] if total else []

    idle = sum(n for name, n in leaves.items() if name.startswith("EpollSelector.select"))
    return {
        "threads": dict(threads.most_common()),
        "thread": thread,
        "samples": total,
        "idle_pct": round(100.0 * idle / total, 1) if total else None,
        "inclusive_pct": share(inclusive),
        "leaf_pct": share(leaves),
    }


def _shared_base(stacks: list[tuple[list[str], int]]) -> list[str]:
    """The leading frames shared by every stack that starts where most samples start."""
    firsts = collections.Counter()
    for names, n in stacks:
        if names:
            firsts[names[0]] += n
    if not firsts:
        return []
    full = [names for names, _ in stacks if names and names[0] == firsts.most_common(1)[0][0]]
    shared = []
    for i in range(min(len(names) for names in full)):
        if any(names[i] != full[0][i] for names in full):
            break
        shared.append(full[0][i])
    return shared


def _name(frame: str) -> str:
    """ "func (path/to/file.py:12)" → "func (file.py)": lines of one function count together."""
    func, _, where = frame.partition(" (")
    return "%s (%s)" % (func, os.path.basename(where.rsplit(":", 1)[0])) if where else func


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", help="serve this export (a server of our own on a free port)")
    ap.add_argument("--url", help="or measure the server already running here...")
    ap.add_argument("--pid", type=int, help="...whose Granian process (parent or worker) is this")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--interface", default="rsgi", choices=("rsgi", "asgi"), help="Granian's, with --export")
    ap.add_argument("--workload", default=os.path.join(ROOT, "benchmarks/workloads/laya_1q.jsonl"))
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--thread", default="MainThread", help="whose functions to list (omni-executor: the executor)")
    ap.add_argument("--no-spy", action="store_true", help="CPU time per request only, no py-spy")
    ap.add_argument(
        "--gil", action="store_true", help="py-spy samples only the thread holding the GIL: where the worker's GIL goes"
    )
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    spy = None if args.no_spy else shutil.which("py-spy")
    if spy is None and not args.no_spy:
        raise SystemExit("py-spy is not installed (pip install py-spy), or pass --no-spy")
    if bool(args.export) == bool(args.url and args.pid):
        raise SystemExit("give --export, or --url and --pid of a running server")
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        if args.export:
            # The caller's environment applies, its OMNI_* settings included.
            env = dict(os.environ, OMNI_MODELS=args.export, OMNI_DEVICE=args.device, OTEL_SDK_DISABLED="true")
            url, pid = stack.enter_context(serve(env, os.path.join(tmp, "server.log"), args.interface))
            worker = _worker_pid(pid)
        else:
            url, worker = args.url.rstrip("/"), _worker_pid(args.pid)
        # Enough requests to outlast the sampling window at any plausible rate.
        requests = max(2000, int(args.concurrency * 400 * args.seconds))
        load = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.load",
                "--url",
                url,
                "--workload",
                args.workload,
                "--concurrency",
                str(args.concurrency),
                "--requests",
                str(requests),
                "--procs",
                "1",
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            time.sleep(3.0)
            cost = cpu_per_request(worker, url, args.seconds)
            report = {}
            if spy is not None:
                raw = os.path.join(tmp, "raw.txt")
                done = subprocess.run(
                    [
                        spy,
                        "record",
                        "-p",
                        str(worker),
                        "-d",
                        str(int(args.seconds)),
                        "-r",
                        str(args.rate),
                        "--threads",
                        "--nonblocking",
                        "-f",
                        "raw",
                        "-o",
                        raw,
                    ]
                    + (["--gil"] if args.gil else []),
                    capture_output=True,
                    text=True,
                )
                if done.returncode != 0 or not os.path.exists(raw):
                    raise SystemExit("py-spy failed (ptrace rights?): %s" % (done.stderr or done.stdout)[-400:])
                with open(raw, encoding="utf-8") as f:
                    report = summarize(f, thread=args.thread, top=args.top)
        finally:
            # The whole group: the generator's pool process would otherwise go on loading the
            # server (and whatever is measured next) for its remaining requests.
            os.killpg(load.pid, signal.SIGKILL)
            load.wait()
    report.update(
        export=args.export or args.url, device=args.device, concurrency=args.concurrency, seconds=args.seconds, cpu=cost
    )
    print(
        "%d requests in %.1f s (%.0f req/s); CPU per request: loop thread %.0f µs, other threads %.0f µs, "
        "whole worker %.0f µs; the host %.1f%% busy, %.1f%% stolen"
        % (
            cost["requests"],
            cost["seconds"],
            cost["requests_per_s"],
            cost["loop_us"],
            cost["others_us"],
            cost["total_us"],
            cost["host"]["busy_pct"],
            cost["host"]["steal_pct"],
        )
    )
    print("  by thread (µs a request): %s" % cost["threads_us"])
    if spy is not None:
        print(
            "samples per thread: %s; the loop idle (select) in %s%% of its samples"
            % (report["threads"], report["idle_pct"])
        )
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(env: dict, log_path: str, interface: str = "rsgi", timeout: float = 180.0, root: str = ROOT):
    """(url, pid of Granian's main process) of a server started on a free loopback port through
    `python -m app.launch` (it execs Granian in place, so the pid is Granian's), ready; stopped,
    with its whole process group, on exit. app.launch serves through RSGI only: `asgi` runs
    Granian with app.launch's arguments and event loop, through its ASGI interface instead.
    `root`: the checkout whose app is served (another commit's, to compare)."""
    from app.launch import event_loop

    port = _free_port()
    if interface == "rsgi":
        cmd = [sys.executable, "-m", "app.launch", "--host", "127.0.0.1", "--port", str(port)]
    else:
        cmd = [
            sys.executable,
            "-m",
            "granian",
            "--interface",
            interface,
            "--workers",
            "1",
            "--loop",
            event_loop(env),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers-kill-timeout",
            "30",
            "app.main:app",
        ]
    url = "http://127.0.0.1:%d" % port
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=root,
            env=dict(env, PYTHONUNBUFFERED="1"),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        try:
            wait_ready(url, proc.pid, timeout)
        except RuntimeError as exc:
            with open(log_path, encoding="utf-8", errors="replace") as f:
                raise SystemExit("%s:\n%s" % (exc, f.read()[-4000:])) from None
        yield url, proc.pid
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(40)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _thread_ticks(pid: int) -> dict[int, int]:
    """utime + stime, in clock ticks, of every thread of `pid`."""
    ticks = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        ticks[int(tid)] = int(fields[11]) + int(fields[12])  # fields 14 and 15 of stat(5)
    return ticks


def _served(url: str) -> float:
    """Requests the server has answered on /v1/systemone, from its own counter."""
    return scrape.totals(url, ["omni_requests_total"], {"route": "/v1/systemone"})["omni_requests_total"]


def cpu_per_request(pid: int, url: str, seconds: float) -> dict:
    """CPU µs per answered request over `seconds` of load: the loop's thread (tid == pid), the
    other threads together (executor, Granian's runtime, ONNX Runtime's pool), and the sum."""
    hz = os.sysconf("SC_CLK_TCK")
    n0, t0, w0, s0 = _served(url), _thread_ticks(pid), time.perf_counter(), host_facts.read_cpu_times()
    time.sleep(seconds)
    n1, t1, w1, s1 = _served(url), _thread_ticks(pid), time.perf_counter(), host_facts.read_cpu_times()
    n = max(1.0, n1 - n0)
    used = {tid: t1[tid] - t0.get(tid, 0) for tid in t1}
    loop = used.get(pid, 0) / hz
    others = sum(v for tid, v in used.items() if tid != pid) / hz
    return {
        "requests": int(n),
        "seconds": round(w1 - w0, 2),
        "requests_per_s": round(n / (w1 - w0), 1),
        "loop_us": round(loop / n * 1e6, 1),
        "others_us": round(others / n * 1e6, 1),
        "total_us": round((loop + others) / n * 1e6, 1),
        "loop_busy_pct": round(100.0 * loop / (w1 - w0), 1),
        # The whole host over the same window: what the hypervisor took (steal) is a prime
        # suspect where the same code serves less on one host than another.
        "host": host_facts.shares(s0, s1),
        "threads_us": {
            _thread_name(pid, tid): round(v / hz / n * 1e6, 1)
            for tid, v in sorted(used.items(), key=lambda kv: -kv[1])
            if v
        },
    }


def _thread_name(pid: int, tid: int) -> str:
    try:
        with open("/proc/%d/task/%d/comm" % (pid, tid)) as f:
            return "%s/%d" % (f.read().strip(), tid)
    except OSError:
        return str(tid)


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
