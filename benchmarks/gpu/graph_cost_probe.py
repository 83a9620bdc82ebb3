"""What each CUDA graph a Laya session captures costs: capture time, GPU memory, and what its
replay saves over an uncaptured run (GPU machine; run it alone on the GPU).

    python -m benchmarks.gpu.graph_cost_probe --export DIR [--shapes all|ROWSxLEN,...] [--iters 10] [--out F]

`--shapes all` (the default) is every shape the executor can capture, as it captures them when
the model loads (LayaAdapter.capture_batches: each row bucket up to OMNI_CUDA_GRAPH_ROWS at every
row length up to the model's limit, within its GraphPolicy.max_tokens). On one session built as
the executor builds it, with no graph budget:
1. every shape runs once uncaptured, so ONNX Runtime's memory arena has grown to the largest
   of them before any capture; the device's used memory is read (nvidia-smi, after a settle);
2. every shape is captured in turn, smallest first, with the capture's time and the device's
   used memory after it;
3. per shape, the p50 of `--iters` uncaptured runs and of `--iters` replays, interleaved.
The rows are pad ids; values do not matter to time or memory.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
import warnings


def used_mib(device: int = 0) -> int | None:
    """The device's used memory (MiB) from nvidia-smi; None without it."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", str(device)],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        return int(out.strip().splitlines()[0])
    except Exception:
        return None


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--export", required=True)
    ap.add_argument("--shapes", default="all", help="all, or ROWSxLENGTH,... (rows a batch has, row length)")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--settle", type=float, default=0.2, help="seconds before each memory reading")
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of this script (no capture, no memory)")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")

    from app.config import Settings
    from app.runtime import sessions
    from models import gdn_plan
    from models.laya.prepare import Row
    from models.registry import load

    settings = Settings.from_env()
    model = load(args.export)
    adapter, policy = model.adapter, model.cuda_graphs
    if args.shapes == "all":  # what the executor captures as the model loads
        batches = adapter.capture_batches(settings.cuda_graph_rows, policy.max_tokens if policy else 0)
    else:
        batches = []
        for item in args.shapes.split(","):
            n, length = (int(x) for x in item.lower().split("x"))
            batches.append([[Row([adapter.pad_id] * length, [0], 0)] for _ in range(n)])
    budget = max(len(batches), 1)
    if args.device == "cpu":
        info = sessions.create(model.onnx_path, "cpu")
        runner = sessions.GraphRunner(info.session, 0, budget, device="cpu")
    else:
        info = sessions.create(
            model.onnx_path,
            "cuda",
            cuda_graphs=budget,
            gdn_plan=gdn_plan.plan_for(settings.cuda_gdn_plan, gdn_plan.gdn_dtype(model.manifest)),
        )
        runner = info.session
    cases = []
    for works in batches:
        feeds = adapter.pack(works, static=True).feeds
        cases.append(
            {
                "rows": len(works),
                "length": len(works[0][0].ids),
                "shape": list(feeds["input_ids"].shape),
                "feeds": feeds,
            }
        )

    def settle_used():
        time.sleep(args.settle)
        return used_mib() if args.device != "cpu" else None

    start_used = settle_used()
    for case in cases:  # 1. the arena grows to the largest shape first
        runner.run_uncaptured(None, case["feeds"])
    arena_used = settle_used()
    print(
        "device memory: %s MiB after the load, %s MiB after one uncaptured run of each of %d shapes"
        % (start_used, arena_used, len(cases)),
        flush=True,
    )
    before = arena_used
    for case in cases:  # 2. capture each shape
        t0 = time.perf_counter()
        runner.capture(case["feeds"])
        case["capture_ms"] = round((time.perf_counter() - t0) * 1000.0, 2)
        after = settle_used()
        case["memory_mib"] = None if after is None or before is None else after - before
        before = after
    times = {i: {"uncaptured": [], "replay": []} for i in range(len(cases))}
    for _ in range(args.iters):  # 3. interleaved, so drift hits both alike
        for i, case in enumerate(cases):
            for kind, call in (("uncaptured", runner.run_uncaptured), ("replay", runner.run)):
                t0 = time.perf_counter()
                call(None, case["feeds"])
                times[i][kind].append((time.perf_counter() - t0) * 1000.0)
    report = {
        "export": args.export,
        "runtime": info.runtime,
        "graph_rows": settings.cuda_graph_rows,
        "max_tokens": policy.max_tokens if policy else 0,
        "iters": args.iters,
        "device_used_mib": {"after_load": start_used, "after_uncaptured": arena_used, "after_captures": before},
        "shapes": [],
    }
    for i, case in enumerate(cases):
        row = {k: v for k, v in case.items() if k != "feeds"}
        row["uncaptured_ms"] = round(statistics.median(times[i]["uncaptured"]), 3)
        row["replay_ms"] = round(statistics.median(times[i]["replay"]), 3)
        report["shapes"].append(row)
        print(
            "%-10s (%2d rows of %3d) capture %7.1f ms  memory %+5s MiB  uncaptured %7.3f  replay %7.3f ms"
            % (
                "%dx%d" % tuple(row["shape"]),
                row["rows"],
                row["length"],
                row["capture_ms"],
                row["memory_mib"],
                row["uncaptured_ms"],
                row["replay_ms"],
            ),
            flush=True,
        )
    captures = [r["capture_ms"] for r in report["shapes"]]
    report["summary"] = {
        "shapes": len(cases),
        "capture_ms_total": round(sum(captures), 1),
        "capture_ms_p50": round(statistics.median(captures), 1) if captures else None,
        "memory_mib_total": (before - arena_used if before is not None and arena_used is not None else None),
    }
    print(json.dumps(report["summary"]), "device memory after all captures: %s MiB" % before, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
