"""The figures the uvloop session's report quotes, from the raw files here.

Usage: python benchmarks/results/2026-12-02-h200-uvloop/summary.py raw/laya/http_48_*.json.gz ...
Per pass: p50/p95/p99/mean ms and requests/s; at c=1 the Server-Timing `queue` stage (mean, and
the share of requests over 0.12 ms) and the time outside the server (client latency less the
server's `total`); at c=64 the requests over 25 ms, grouped by send time (within 20 ms of each
other), which is how a full garbage collection shows: every request in flight late at once.
"""
import gzip
import json
import os
import statistics as st
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from benchmarks.load import server_timing  # noqa: E402


for path in sys.argv[1:]:
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        data = json.load(f)
    print("==", path.rsplit("/", 1)[-1])
    for level in data["levels"]:
        for p in level["passes"]:
            rows = p.get("per_request") or []
            line = "c=%-3d p50 %.2f p95 %.2f p99 %.2f mean %.2f %6.0f/s" % (
                p["concurrency"], p["p50_ms"], p["p95_ms"], p["p99_ms"], p["mean_ms"], p["requests_per_s"])
            if p["concurrency"] == 1 and rows:
                t = [server_timing(r[4]) for r in rows if r[4]]
                queue = [x["queue"] for x in t]
                outside = [r[1] - x["total"] for r, x in zip(rows, t)]
                line += " | queue mean %.3f ms, %d%% over 0.12; outside p50 %.2f; stages p50 %s" % (
                    st.mean(queue), 100 * sum(q > 0.12 for q in queue) // len(queue), st.median(outside),
                    {k: round(v, 3) for k, v in p["server_timing_p50_ms"].items()})
            if p["concurrency"] == 64 and rows:
                slow, groups = sorted((r for r in rows if r[1] > 25), key=lambda r: r[3]), []
                for r in slow:
                    if groups and r[3] - groups[-1][-1][3] < 0.02:
                        groups[-1].append(r)
                    else:
                        groups.append([r])
                line += " | %d of %d over 25 ms, groups of %s" % (len(slow), len(rows), [len(g) for g in groups])
            print(line)
