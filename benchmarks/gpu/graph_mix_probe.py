"""Interleaved shapes through one CUDA-graph session vs a plain one (in-process, no HTTP): does a
replayed graph stay fast when other shapes (captured or not) run between its replays?

    python -m benchmarks.gpu.graph_mix_probe --export DIR --lengths 80,200,... --passes 3
    python -m benchmarks.gpu.graph_mix_probe --export DIR --workload W.jsonl --passes 3

With --workload, each request goes the server's way one at a time (c=1): the model's prepare,
the model's graph policy (batch_runner), its adapter's packing, the session; times per request.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--export", required=True)
    ap.add_argument("--lengths", default="80,150,230,310,420,530,640,760,880,1000,1500,2200,3000")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--capture-after", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--workload")
    ap.add_argument("--thread", action="store_true", help="run --workload on a second thread, as the executor")
    ap.add_argument("--sdpa-kernel", type=int, default=0, help="as the server's OMNI_CUDA_SDPA_KERNEL")
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of --workload (no capture)")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.workload:
        if args.thread:           # as the server: sessions created and run on another thread
            import threading

            t = threading.Thread(target=served, args=(args,))
            t.start()
            t.join()
            return None
        return served(args)
    from app.runtime import sessions

    path = args.export + "/model.onnx"
    lengths = [int(x) for x in args.lengths.split(",")]
    rng = np.random.default_rng(0)
    feeds = {n: {"input_ids": rng.integers(0, 1000, (1, n), dtype=np.int64),
                 "positions": np.array([n - 1], dtype=np.int64)} for n in lengths}
    report = {}
    for label, graphs in (("plain", 0), ("graphs", 64)):
        info = sessions.create(path, "cuda", cuda_graphs=graphs, capture_after=args.capture_after)
        s = info.session
        out = {}
        for p in range(args.passes):
            times = {}
            for n in lengths:
                run = s.run
                if graphs and n > args.max_tokens:
                    run = s.run_uncaptured
                t0 = time.perf_counter()
                run(None, feeds[n])
                times[n] = (time.perf_counter() - t0) * 1000
            out["pass%d" % (p + 1)] = times
            print(label, "pass", p + 1, " ".join("%d:%.1f" % (n, t) for n, t in times.items()),
                  "mean %.1f" % statistics.mean(times.values()), flush=True)
        report[label] = out
        del s, info
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


def served(args) -> None:
    import logging

    from app.runtime import sessions

    logging.basicConfig(level=logging.INFO, format="%(message)s")     # the runner's capture lines
    from models import registry

    model = registry.load(args.export)
    policy = model.cuda_graphs
    with open(args.workload, encoding="utf-8") as f:
        prepared = [model.prepare(json.loads(line)) for line in f if line.strip()]
    report = {"tokens": [p.tokens for p in prepared]}
    for label, graphs in (("plain", 0), ("graphs", 64)):
        info = sessions.create(model.onnx_path, args.device, cuda_graphs=graphs, sdpa_kernel=args.sdpa_kernel,
                               capture_after=policy.capture_after if policy else 1)
        if args.device == "cpu" and graphs:     # the dry run: the runner's bookkeeping, no capture
            info.session = sessions.GraphRunner(info.session, 0, graphs, policy.capture_after, device="cpu")
            info.static_shapes = True
        for p in range(args.passes):
            times = []
            for prep in prepared:
                t0 = time.perf_counter()
                static, run = sessions.batch_runner(info.session, info.static_shapes, prep.rows, 16,
                                                    prep.rows * prep.longest, policy.max_tokens if policy else 0)
                packed = model.adapter.pack([prep.work], static=static)
                outs = [run(None, f) for f in (packed.parts or [packed.feeds])]
                model.adapter.unpack(outs if packed.parts else outs[0], [prep.work], packed)
                times.append((time.perf_counter() - t0) * 1000)
            report["%s_pass%d" % (label, p + 1)] = times
            print(label, "pass", p + 1, "mean %.1f p50 %.1f" % (statistics.mean(times), statistics.median(times)),
                  "captured", len(getattr(info.session, "graphs", ())), flush=True)
        del info
    last = args.passes
    worst = sorted(range(len(prepared)), key=lambda i: report["plain_pass%d" % last][i]
                   - report["graphs_pass%d" % last][i])[:8]
    for i in worst:
        print("tokens %d rows %d: plain %.1f graphs %.1f ms (last pass)" % (
            prepared[i].tokens, prepared[i].rows, report["plain_pass%d" % last][i], report["graphs_pass%d" % last][i]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
