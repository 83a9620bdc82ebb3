"""In-process latency, no HTTP: the `laya` package's own predict path vs our ONNX Runtime engine.

    python -m benchmarks.inprocess --checkpoint CK --export EX --out results.json [--device cuda]

Same requests, variants interleaved, 20 warm-up + 200 timed calls each, synchronized (every
call returns host numbers). Workloads: 1 question; 3 questions over a long state; 16
one-question requests batched into one call.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings

from benchmarks.load import nearest_rank
from benchmarks.make_workloads import laya_requests


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--export", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")

    import laya

    from app.runtime import sessions
    from models.registry import load

    agent = laya.Agent(args.checkpoint, device=args.device)
    model = load(args.export)
    device = "cuda" if args.device.startswith("cuda") else "cpu"
    info = sessions.create(model.onnx_path, device)
    graphs = sessions.create(model.onnx_path, device, cuda_graphs=64) if device == "cuda" else info

    def ours(bodies, runner=info):
        prepared = [model.prepare(b) for b in bodies]
        works = [p.work for p in prepared]
        packed = model.adapter.pack(works, static=runner.static_shapes)
        outs = model.adapter.unpack(runner.session.run(None, packed.feeds), works, packed)
        return [model.finish(p, o, "reference", model.name) for p, o in zip(prepared, outs)]

    one = laya_requests(1, 1, 11)[0]
    three = laya_requests(1, 3, 12, long_state=True)[0]
    sixteen = laya_requests(16, 1, 13)
    tokens = {"1q": ours([one])[0]["usage"]["input_tokens"],
              "3q": ours([three])[0]["usage"]["input_tokens"],
              "16x1q": sum(r["usage"]["input_tokens"] for r in ours(sixteen))}
    variants = {
        ("laya", "1q"): lambda: agent.system_one(one["state"], one["questions"]),
        ("ours", "1q"): lambda: ours([one]),
        ("ours+graphs", "1q"): lambda: ours([one], graphs),
        ("laya", "3q"): lambda: agent.system_one(three["state"], three["questions"]),
        ("ours", "3q"): lambda: ours([three]),
        ("ours+graphs", "3q"): lambda: ours([three], graphs),
        ("laya", "16x1q"): lambda: agent.predict_batch([b["state"] for b in sixteen], sixteen[0]["questions"]),
        ("ours", "16x1q"): lambda: ours(sixteen),
        ("ours+graphs", "16x1q"): lambda: ours(sixteen, graphs),
    }
    times = {k: [] for k in variants}
    for i in range(args.warmup + args.iters):
        for key, fn in variants.items():            # interleaved
            t0 = time.perf_counter()
            fn()
            if i >= args.warmup:
                times[key].append((time.perf_counter() - t0) * 1000.0)
    report = {"device": info.device, "runtime": info.runtime, "laya": laya.__version__,
              "laya_dtype": str(agent.dtype), "tokens": tokens, "command": " ".join(sys.argv), "results": {}}
    for (who, wl), ts in times.items():
        r = {"p50_ms": nearest_rank(ts, 50), "p95_ms": nearest_rank(ts, 95), "mean_ms": statistics.fmean(ts)}
        report["results"]["%s/%s" % (who, wl)] = r
        print("%-11s %-6s p50 %7.2f ms  p95 %7.2f ms" % (who, wl, r["p50_ms"], r["p95_ms"]), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
