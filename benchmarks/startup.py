"""Start-to-ready and first-request time of servers a GPU runner has just started, one line each:

    python -m benchmarks.startup --since T0 --port 18080 [--port 18081 ...] [--pid PID ...] \
        --first benchmarks/workloads/laya_48.jsonl [--timeout 240] [--readyz-out readyz.json]

`--since` is the epoch second the first server was started. Each port's `/readyz` is polled
until it answers 200. Then the workload's first request is sent and timed: the first answer a
client gets once the server says it is ready. The server's own warm-up request, made before it
says so, does not count. The exit status is 1 when a server exits (its `--pid`, in the order of
the ports) or is not ready by `--timeout`, so a runner stops before it loads a dead port.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request


def _gone(pid: int | None) -> bool:
    """The process has exited, or is a zombie its shell has not reaped."""
    if pid is None:
        return False
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_ready(url: str, pid: int | None, timeout: float) -> bytes:
    """/readyz's body once it answers 200; raises RuntimeError when the server exits or the
    timeout passes first."""
    deadline = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=10) as r:
                return r.read()
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if _gone(pid):
                raise RuntimeError("the server on %s exited before it was ready; see its log" % url) from None
            if time.time() > deadline:
                raise RuntimeError("the server on %s was not ready in %.0f s; see its log" % (url, timeout)) from None
            time.sleep(0.2)


def first_request_ms(url: str, body: bytes) -> float:
    """One request's time to its whole answer, in ms; raises on anything but 200."""
    request = urllib.request.Request(url + "/v1/systemone", body, {"content-type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as r:
        r.read()
    return (time.perf_counter() - t0) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--since", type=float, required=True, help="epoch seconds the first server was started")
    ap.add_argument("--port", type=int, action="append", required=True)
    ap.add_argument("--pid", type=int, action="append", default=[], help="each port's server process, in order")
    ap.add_argument("--first", required=True, help="a workload (JSONL): its first line is the first request")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds each server may take to be ready")
    ap.add_argument("--readyz-out", help="write the last port's /readyz body here")
    args = ap.parse_args(argv)
    with open(args.first, encoding="utf-8") as f:
        body = json.dumps(json.loads(next(line for line in f if line.strip()))).encode()
    pids = args.pid + [None] * (len(args.port) - len(args.pid))
    for port, pid in zip(args.port, pids):
        url = "http://127.0.0.1:%d" % port
        try:
            readyz = wait_ready(url, pid, args.timeout)
        except RuntimeError as e:
            print(e, file=sys.stderr)
            return 1
        ready_s = time.time() - args.since
        first = first_request_ms(url, body)
        if args.readyz_out:
            with open(args.readyz_out, "wb") as f:
                f.write(readyz)
        print("port %d: start-to-ready %.1f s, first request %.1f ms" % (port, ready_s, first), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
