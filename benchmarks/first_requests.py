"""A fresh server's first requests after it is ready, against its steady state.

    python -m benchmarks.first_requests --workload benchmarks/workloads/laya_48.jsonl \
        [--requests 200] [--concurrency 1,16] [--code DIR] [--label L] [--out F] [--logs DIR]

For each concurrency c, a server of its own (`python -m app.launch` in `--code`, default this
checkout, with the OMNI_* settings of the environment) is started and timed to `/readyz` 200.
At once `--requests` requests go at c: the first after ready, which meet whatever the server
has not yet captured or warmed. Then, once its CUDA graph captures have stopped for
`--quiet` seconds beyond the rest the server takes after each (`omni_cuda_graph_captures_total`
and `omni_cuda_graph_capture_seconds_total`; at most `--settle` seconds; a pass of the workload
at c runs first, so traffic's own shapes are seen), `--requests` more: the steady state.
Reports start-to-ready, mean and p50 of both passes, and first over steady. Run `--code` on
another commit's checkout to compare its behaviour on the same host.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time

from benchmarks import scrape
from benchmarks.load import load_workload, run_pass
from benchmarks.loop_profile import ROOT, serve

CAPTURES = "omni_cuda_graph_captures_total"
CAPTURE_SECONDS = "omni_cuda_graph_capture_seconds_total"


def _captures(url: str) -> tuple[float, float]:
    """(graphs captured, seconds spent capturing them) over the server's models."""
    found = scrape.totals(url, [CAPTURES, CAPTURE_SECONDS])
    return found[CAPTURES], found[CAPTURE_SECONDS]


def settle(url: str, quiet: float, limit: float) -> tuple[float, float]:
    """Wait until the server's captures have stopped, at most `limit` seconds: (seconds waited,
    captures counted then). Stopped means none for `quiet` seconds beyond the rest the server
    takes after its last capture (app.runtime.batching.IdleCaptures: a capture of t seconds is
    followed by t × (1/CAPTURE_SHARE − 1) without one), so a model whose captures take long (a
    Qwen3.5 9B or 27B, a rest of seconds) is not taken as settled between two of them."""
    from app.runtime.batching import CAPTURE_SHARE

    t0 = last_change = time.monotonic()
    seen, spent = _captures(url)
    hold = quiet
    while time.monotonic() - last_change < hold and time.monotonic() - t0 < limit:
        time.sleep(min(0.5, quiet))
        count, seconds = _captures(url)
        if count != seen:
            each = (seconds - spent) / (count - seen)
            hold = quiet + each * (1.0 / CAPTURE_SHARE - 1.0)
            seen, spent, last_change = count, seconds, time.monotonic()
    return time.monotonic() - t0, seen


def _loaded(url: str) -> list[dict]:
    """What `/readyz` says each model's start took: session creation (with its captures at
    load), the warm-up request, and whether it replays CUDA graphs."""
    import urllib.request

    with urllib.request.urlopen(url + "/readyz", timeout=10) as reply:
        body = json.load(reply)
    return [{k: m.get(k) for k in ("name", "load_ms", "warmup_ms", "cuda_graphs")} for m in body.get("models", [])]


def _summary(p: dict) -> dict:
    return {k: p[k] for k in ("requests", "ok", "errors", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "requests_per_s")}


def measure(
    code: str, bodies, concurrency: int, requests: int, procs: int, pool, quiet: float, limit: float, log_dir: str
) -> dict:
    env = {k: v for k, v in os.environ.items()}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (code, env.get("PYTHONPATH", "")) if x)
    t0 = time.monotonic()
    log = os.path.join(log_dir, "server-c%d.log" % concurrency)
    with serve(env, log, root=code) as (url, _):
        ready_s = time.monotonic() - t0
        at_ready, capture_s = _captures(url)
        loaded = _loaded(url)
        first = run_pass(url, bodies, concurrency, requests, procs, pool, per_request=True)
        after_first, _ = _captures(url)
        run_pass(url, bodies, concurrency, max(len(bodies), concurrency), procs, pool)
        waited, captured = settle(url, quiet, limit)
        steady = run_pass(url, bodies, concurrency, requests, procs, pool, per_request=True)
    return {
        "concurrency": concurrency,
        "ready_s": round(ready_s, 3),
        "captures_at_ready": at_ready,
        "capture_s_at_ready": round(capture_s, 3),
        "models_at_ready": loaded,
        "captures_after_first": after_first,
        "captures_before_steady": captured,
        "settled_s": round(waited, 3),
        "first": _summary(first),
        "steady": _summary(steady),
        "first_over_steady": {k: first[k] / steady[k] for k in ("mean_ms", "p50_ms")},
        "first_ms": [r[1] for r in first["per_request"]],
        "steady_ms": [r[1] for r in steady["per_request"]],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", required=True)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", default="1,16")
    ap.add_argument("--code", default=ROOT, help="the checkout whose app is served (default: this one)")
    ap.add_argument("--quiet", type=float, default=5.0, help="seconds without a capture that count as settled")
    ap.add_argument("--settle", type=float, default=300.0, help="seconds to wait for the captures at most")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--label", default="")
    ap.add_argument("--out")
    ap.add_argument("--logs", help="keep each server's log here (server-cN.log; default: discarded)")
    args = ap.parse_args(argv)
    bodies = load_workload(args.workload)
    code = os.path.abspath(args.code)
    report = {
        "label": args.label,
        "code": code,
        "workload": os.path.basename(args.workload),
        "requests": args.requests,
        "command": " ".join(sys.argv),
        "levels": [],
    }
    with tempfile.TemporaryDirectory() as scratch, mp.get_context("fork").Pool(args.procs) as pool:
        logs = args.logs or scratch
        os.makedirs(logs, exist_ok=True)
        for c in (int(x) for x in args.concurrency.split(",")):
            level = measure(code, bodies, c, args.requests, args.procs, pool, args.quiet, args.settle, logs)
            report["levels"].append(level)
            f, s = level["first"], level["steady"]
            print(
                "%s c=%-3d ready %.1f s  first %d: mean %.2f p50 %.2f ms  steady: mean %.2f p50 %.2f ms  "
                "(x%.2f mean, x%.2f p50)  captures %g at ready, %g settled"
                % (
                    args.label or code,
                    c,
                    level["ready_s"],
                    f["requests"],
                    f["mean_ms"],
                    f["p50_ms"],
                    s["mean_ms"],
                    s["p50_ms"],
                    level["first_over_steady"]["mean_ms"],
                    level["first_over_steady"]["p50_ms"],
                    level["captures_at_ready"],
                    level["captures_before_steady"],
                ),
                flush=True,
            )
            if args.out:  # after each level: a run cut short keeps what it measured
                with open(args.out, "w") as f:
                    json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
