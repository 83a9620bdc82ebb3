"""Closed-loop HTTP load generator for POST /v1/systemone.

    python -m benchmarks.load --url http://127.0.0.1:8000 --workload benchmarks/workloads/laya_1q.jsonl \
        --concurrency 1,8,16,64 --out results.json

Per concurrency: one excluded warm-up pass (a quarter of a pass unless `--warmup` says how many
requests: a workload of many distinct lengths needs a whole pass, or the first measured pass is
where most shapes are seen first), then two measured passes. Each of `c` clients keeps
one HTTP/1.1 keep-alive connection and sends its share of the workload's first lines in turn,
the next as soon as the last answered: client k of c sends lines k, k + c, k + 2c, ..., so every
pass at every concurrency sends the same requests (a level's requests/s then compares with
another's on the same work). A minimal asyncio HTTP client keeps the load generator cheap; clients are
spread over several processes (`--procs`) so the generator is not what is measured. What the
client itself adds to each latency depends on its event loop (`--client-loop`: asyncio's own, the
default every earlier report used; uvloop; or `blocking`, one plain socket per client thread,
the least a Python client can add at c=1).
Reports p50/p95/p99 (nearest rank), requests/s, decisions/s (questions answered per second),
errors by status, and the median of each Server-Timing stage; `--per-request` also keeps each
request's workload line, latency, status, when it was sent (s after the pass started) and its
Server-Timing header: whether the slowest requests came together (one stall) or apart. Where the
server's `/metrics` answers, each pass also reports its forward passes, rows and padding tokens
per pass (the counters' change over the pass), and the wall time of a pass's session runs (the
device's work and the executor thread's wait for the GIL after it): how the load was batched,
which latency alone does not show.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing as mp
import os
import statistics
import sys
import time
from urllib.parse import urlparse

from benchmarks import scrape

# Prometheus series summed over models: forward passes, rows, padding tokens (app/metrics.py).
BATCH_SERIES = {
    "omni_batch_rows_count": "batches",
    "omni_batch_rows_sum": "rows",
    "omni_batch_forward_seconds_sum": "forward_s",
    "omni_batch_padding_tokens_sum": "padding_tokens",
    "omni_input_tokens_total": "real_tokens",
    "omni_batch_run_tokens_total": "run_tokens",
}


def nearest_rank(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[max(0, math.ceil(q / 100.0 * len(s)) - 1)]


def _request(host: str, bodies, n: int) -> tuple[int, bytes, int]:
    """(workload line, HTTP request bytes, decisions) of a client's n-th request."""
    index = n % len(bodies)
    body, decisions = bodies[index]
    head = (
        "POST /v1/systemone HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
        "Content-Length: %d\r\n\r\n" % (host, len(body))
    ).encode()
    return index, head + body, decisions


def _header(line: bytes, length: int, timing: str) -> tuple[int, str]:
    """(content length, Server-Timing) updated by one response header line."""
    name, _, value = line.decode("latin-1").partition(":")
    name = name.strip().lower()
    if name == "content-length":
        return int(value), timing
    if name == "server-timing":
        return length, value.strip()
    return length, timing


async def _client(host, port, bodies, count, first, stride, results):
    reader, writer = await asyncio.open_connection(host, port)
    try:
        for i in range(count):
            index, data, decisions = _request(host, bodies, first + i * stride)
            sent, t0 = time.time(), time.perf_counter()
            writer.write(data)
            await writer.drain()
            status_line = await reader.readline()
            status = int(status_line.split()[1])
            length, timing = 0, ""
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                length, timing = _header(line, length, timing)
            await reader.readexactly(length)
            results.append((time.perf_counter() - t0, status, decisions, timing, index, sent))
    finally:
        writer.close()


def _read_response(f):
    """(status, Server-Timing) of the next response on a buffered socket file, its body consumed."""
    status = int(f.readline().split()[1])
    length, timing = 0, ""
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        length, timing = _header(line, length, timing)
    f.read(length)
    return status, timing


def _blocking_client(host, port, bodies, count, first, stride, results):
    """The same requests as `_client` over one blocking socket: no event loop in the client."""
    import socket

    with socket.create_connection((host, port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        f = sock.makefile("rb")
        for i in range(count):
            index, data, decisions = _request(host, bodies, first + i * stride)
            sent, t0 = time.time(), time.perf_counter()
            sock.sendall(data)
            status, timing = _read_response(f)
            results.append((time.perf_counter() - t0, status, decisions, timing, index, sent))


def _proc(args):
    host, port, bodies, per_client, clients, offset, stride, client_loop = args
    if client_loop == "blocking":
        import threading

        results: list = []
        threads = [
            threading.Thread(
                target=_blocking_client, args=(host, port, bodies, per_client, offset + k, stride, results)
            )
            for k in range(clients)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results

    async def main():
        results = []
        await asyncio.gather(
            *(_client(host, port, bodies, per_client, offset + k, stride, results) for k in range(clients))
        )
        return results

    if client_loop == "uvloop":
        import uvloop

        return uvloop.run(main())
    return asyncio.run(main())


def batch_counters(url: str) -> dict | None:
    """The server's batch counters now, or None where /metrics does not answer."""
    try:
        found = scrape.totals(url, BATCH_SERIES)
    except (OSError, ValueError):
        return None
    return {BATCH_SERIES[name]: value for name, value in found.items()}


def batching(before: dict | None, after: dict | None) -> dict:
    """What the server's forward passes did between two `batch_counters` readings."""
    if before is None or after is None:
        return {}
    d = {k: after[k] - before[k] for k in after if k in before}
    n = d["batches"]
    out = {
        "batches": int(n),
        "rows_per_batch": d["rows"] / n if n else float("nan"),
        "padding_tokens_per_batch": d["padding_tokens"] / n if n else float("nan"),
    }
    for key in ("real_tokens", "run_tokens"):  # served (usage) and run (a shared head once a pass)
        if key in d:
            out[key] = int(d[key])
    if d.get("forward_s", 0.0) > 0:  # servers before the series have none
        out["forward_ms_per_batch"] = d["forward_s"] * 1000.0 / n if n else float("nan")
    return out


def compute(p: dict, params_b: float, peak_tflops: float) -> dict:
    """Achieved dense compute of a pass from its real (unpadded) input tokens: 2 FLOP a parameter a
    token (the matrix products; attention's own products, small at these lengths, left out), and
    its share of the GPU's dense fp16 peak. From the tokens served (`usage`, every row's whole
    prompt) and, where the server counts them, the tokens its passes ran (`run_tflops`: a prompt
    head shared by a pass's rows once)."""
    if not params_b or "real_tokens" not in p or not p.get("wall_s"):
        return {}
    tflops = 2.0 * params_b * 1e9 * p["real_tokens"] / p["wall_s"] / 1e12
    out = {"real_tokens_per_s": p["real_tokens"] / p["wall_s"], "achieved_tflops": tflops}
    if peak_tflops:
        out["share_of_peak"] = tflops / peak_tflops
    if "run_tokens" in p:  # what the GPU ran: fewer where a pass's rows share a prompt head
        out["run_tflops"] = 2.0 * params_b * 1e9 * p["run_tokens"] / p["wall_s"] / 1e12
        if peak_tflops:
            out["run_share_of_peak"] = out["run_tflops"] / peak_tflops
    return out


def run_pass(url, bodies, concurrency, requests, procs, pool, per_request: bool = False, client_loop: str = "asyncio"):
    u = urlparse(url)
    counters = batch_counters(url)
    per_client = max(1, requests // concurrency)
    procs = max(1, min(procs, concurrency))
    split = [concurrency // procs + (1 if i < concurrency % procs else 0) for i in range(procs)]
    t0, started = time.perf_counter(), time.time()
    firsts = [sum(split[:i]) for i in range(len(split))]  # each process's first client, of all c
    parts = pool.map(
        _proc,
        [
            (u.hostname, u.port, bodies, per_client, n, first, concurrency, client_loop)
            for n, first in zip(split, firsts, strict=True)
            if n
        ],
    )
    wall = time.perf_counter() - t0
    results = [r for part in parts for r in part]
    lat = [r[0] * 1000.0 for r in results if r[1] == 200]
    stages: dict[str, list[float]] = {}
    for _, status, _, timing, _, _ in results:
        if status == 200 and timing:
            for name, ms in server_timing(timing).items():
                stages.setdefault(name, []).append(ms)
    errors: dict[str, int] = {}
    for r in results:
        if r[1] != 200:
            errors[str(r[1])] = errors.get(str(r[1]), 0) + 1
    ok = [r for r in results if r[1] == 200]
    out = {
        "concurrency": concurrency,
        "requests": len(results),
        "ok": len(ok),
        "errors": errors,
        "wall_s": wall,
        "p50_ms": nearest_rank(lat, 50),
        "p95_ms": nearest_rank(lat, 95),
        "p99_ms": nearest_rank(lat, 99),
        "mean_ms": statistics.fmean(lat) if lat else float("nan"),
        "requests_per_s": len(ok) / wall,
        "decisions_per_s": sum(r[2] for r in ok) / wall,
        "server_timing_p50_ms": {k: statistics.median(v) for k, v in stages.items()},
        **batching(counters, batch_counters(url)),
    }
    if per_request:  # [workload line, ms, status, s from the pass's start to its send, Server-Timing]
        out["per_request"] = [[r[4], round(r[0] * 1000.0, 3), r[1], round(r[5] - started, 6), r[3]] for r in results]
    return out


def server_timing(header: str) -> dict[str, float]:
    """A Server-Timing header as the server writes it (`name;dur=MS, ...`): name -> ms."""
    stages = {}
    for part in header.split(","):
        name, _, dur = part.strip().partition(";dur=")
        stages[name] = float(dur)
    return stages


def read_results(path: str) -> dict:
    """A result file this script wrote (`--out`), or its gzipped copy (`.json.gz`, as the
    reports keep the per-request ones)."""
    import gzip

    with (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def pass_table(results: dict) -> list[str]:
    """A result file's measured passes as table rows, one a pass, with the Server-Timing p50 of
    each stage (what the sessions' summary scripts print): a header line, then the rows."""
    from app.timing import STAGES

    rows = ["c  | p50 | p95 | p99 | mean | req/s | dec/s | rows | fwd ms | " + " | ".join(STAGES)]
    for level in results["levels"]:
        for p in level["passes"]:
            st = p.get("server_timing_p50_ms") or {}
            rows.append(
                "%-3d| %.2f | %.2f | %.2f | %.2f | %.0f | %.0f | %.1f | %.2f | %s"
                % (
                    level["concurrency"],
                    p["p50_ms"],
                    p["p95_ms"],
                    p["p99_ms"],
                    p["mean_ms"],
                    p["requests_per_s"],
                    p["decisions_per_s"],
                    p.get("rows_per_batch") or 0,
                    p.get("forward_ms_per_batch") or 0,
                    " | ".join("%.2f" % st.get(s, 0) for s in STAGES),
                )
            )
    return rows


def load_workload(path):
    bodies = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                obj = json.loads(line)
                bodies.append((json.dumps(obj).encode(), len(obj["questions"])))
    return bodies


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--concurrency", default="1,8,16,64")
    ap.add_argument("--requests", type=int, default=0, help="requests per pass (default max(400, 50c))")
    ap.add_argument("--procs", type=int, default=max(1, min(8, (os.cpu_count() or 2) // 2)))
    ap.add_argument("--out")
    ap.add_argument("--label", default="")
    ap.add_argument("--warmup", type=int, default=0, help="warm-up requests (default max(c, requests/4))")
    ap.add_argument(
        "--per-request", action="store_true", help="keep each request's line, ms, status, send time and Server-Timing"
    )
    ap.add_argument(
        "--client-loop",
        choices=("asyncio", "uvloop", "blocking"),
        default="asyncio",
        help="the clients' event loop, or blocking sockets (one thread per client)",
    )
    ap.add_argument("--params-b", type=float, default=0.0, help="the model's parameters, billions: achieved TFLOP/s")
    ap.add_argument("--peak-tflops", type=float, default=0.0, help="the GPU's dense fp16 peak: the share achieved")
    args = ap.parse_args(argv)
    bodies = load_workload(args.workload)
    report = {
        "url": args.url,
        "workload": os.path.basename(args.workload),
        "label": args.label,
        "command": " ".join(sys.argv),
        "client_loop": args.client_loop,
        "levels": [],
    }
    ctx = mp.get_context("fork")
    with ctx.Pool(args.procs) as pool:
        for c in [int(x) for x in args.concurrency.split(",")]:
            n = args.requests or max(400, 50 * c)
            run_pass(
                args.url, bodies, c, args.warmup or max(c, n // 4), args.procs, pool, client_loop=args.client_loop
            )  # excluded
            passes = [
                run_pass(args.url, bodies, c, n, args.procs, pool, args.per_request, args.client_loop) for _ in range(2)
            ]
            for p in passes:
                p.update(compute(p, args.params_b, args.peak_tflops))
            report["levels"].append({"concurrency": c, "passes": passes})
            for p in passes:
                rows = "  %.1f rows/pass" % p["rows_per_batch"] if "rows_per_batch" in p else ""
                forward = "  %.2f ms forward/pass" % p["forward_ms_per_batch"] if "forward_ms_per_batch" in p else ""
                if "achieved_tflops" in p:
                    forward += "  %.1f TFLOP/s" % p["achieved_tflops"]
                if p.get("run_tokens") not in (None, p.get("real_tokens")):
                    forward += " (%.1f as run)" % p["run_tflops"]
                print(
                    "c=%-3d p50 %7.2f ms  p95 %7.2f ms  p99 %7.2f ms  %8.0f req/s  %8.0f decisions/s  errors %s%s"
                    % (
                        c,
                        p["p50_ms"],
                        p["p95_ms"],
                        p["p99_ms"],
                        p["requests_per_s"],
                        p["decisions_per_s"],
                        p["errors"] or 0,
                        rows + forward,
                    ),
                    flush=True,
                )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
