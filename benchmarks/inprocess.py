"""In-process latency, no HTTP: the `laya` package's own predict path vs our engine on one or
more exports, each with and without CUDA graphs.

    python -m benchmarks.inprocess --checkpoint CK --export EX --out results.json [--device cuda]
    python -m benchmarks.inprocess --checkpoint CK --export fp32=EX1 --export fp16=EX2 ...

Same requests, variants interleaved, `--warmup` + `--iters` timed calls each, synchronized (every
call returns host numbers). Workloads: 1 question; 3 questions over a long state; 16 and 64
one-question requests batched into one call. Every export's probabilities on those requests are
also compared with the first export's (models.precision's gate: drift, top choice), so a faster
half-precision graph is reported with what it costs in answers.
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


def _server_default(name: str):
    from app.config import Settings

    return getattr(Settings(), name)


def _exports(specs: list[str]) -> dict[str, str]:
    out = {}
    for spec in specs:
        label, _, path = spec.rpartition("=")
        out[label or ("ours" if len(specs) == 1 else path)] = path
    return out


def _probabilities(responses: list[dict]) -> list[list[float]]:
    return [list(a["probabilities"].values()) for r in responses for a in r["answers"].values() if "probabilities" in a]


def _engines(exports: dict, device: str) -> tuple[dict, object]:
    """{label: (model, runner)} for each export, plus `label+graphs` on CUDA; and the first
    runner's session info. An export the provider refuses is said and left out."""
    from app.runtime import sessions
    from models.registry import load

    engines, info = {}, None
    for label, path in exports.items():
        model = load(path)
        try:
            plain = sessions.create(model.onnx_path, device)
            graphs = sessions.create(model.onnx_path, device, cuda_graphs=64) if device == "cuda" else None
        except Exception as exc:  # one export the provider refuses must not end the run
            print("%s: session failed: %s" % (label, exc), flush=True)
            continue
        info = info or plain
        engines[label] = (model, plain)
        if graphs is not None:
            engines[label + "+graphs"] = (model, graphs)
    return engines, info


def _interleaved(variants: dict, warmup: int, iters: int) -> dict:
    """ms per call of each variant, the variants interleaved, after `warmup` rounds."""
    times: dict = {k: [] for k in variants}
    for i in range(warmup + iters):
        for key, fn in variants.items():
            t0 = time.perf_counter()
            fn()
            if i >= warmup:
                times[key].append((time.perf_counter() - t0) * 1000.0)
    return times


def _kernel_times(engines: dict, workloads: dict) -> dict:
    """CUPTI kernel times of each export's uncaptured forward at 1 and 64 rows."""
    from benchmarks.gpu.cupti import gpu_kernel_times

    out = {}
    for label, (model, runner) in engines.items():
        if label.endswith("+graphs"):
            continue
        for wl in ("1q", "64x1q"):
            works = [model.prepare(b).work for b in workloads[wl]]
            feeds = model.adapter.pack(works).feeds
            try:
                k = gpu_kernel_times(lambda runner=runner, feeds=feeds: runner.session.run(None, feeds))
            except Exception as exc:  # no CUPTI: the timings above still stand
                k = {"error": repr(exc)[:300]}
            out["%s/%s" % (label, wl)] = k
            print(
                "%-16s %-6s kernels: %s"
                % (label, wl, {x: k.get(x) for x in ("wall_ms", "gpu_busy_ms", "kernels_per_call")})
            )
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--export", action="append", required=True, help="PATH or LABEL=PATH; repeatable")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument(
        "--graph-rows",
        type=int,
        default=_server_default("cuda_graph_rows"),
        help="batches of more rows run uncaptured (the server's OMNI_CUDA_GRAPH_ROWS)",
    )
    ap.add_argument(
        "--kernels",
        action="store_true",
        help="also time the GPU kernels (CUPTI) of each export's forward, 1 and 64 rows, no graphs",
    )
    ap.add_argument("--no-laya", action="store_true", help="skip the laya package baseline")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")

    from types import SimpleNamespace

    from app.runtime.batching import BatchPolicy
    from models import precision

    device = "cuda" if args.device.startswith("cuda") else "cpu"
    exports = _exports(args.export)
    engines, info = _engines(exports, device)

    # The executor's own batching policy decides each call's shape (bucketed and replayed, or not).
    policy = BatchPolicy(max_rows=1 << 30, max_tokens=1 << 30, graph_rows=args.graph_rows)

    def ours(engine, bodies):
        model, runner = engine
        prepared = [model.prepare(b) for b in bodies]
        works = [p.work for p in prepared]
        slot = SimpleNamespace(
            model=model, session=runner.session, static_shapes=runner.static_shapes, bucketed=runner.static_shapes
        )
        packed, run = policy.pack(slot, prepared)
        if (
            run == getattr(slot.session, "run", None)
            and hasattr(slot.session, "capture")
            and slot.session.shape_key(packed.feeds) not in slot.session.graphs
        ):
            slot.session.capture(packed.feeds)  # as the executor does between passes
        outs = model.adapter.unpack(run(None, packed.feeds), works, packed)
        return [model.finish(p, o, "reference", model.name) for p, o in zip(prepared, outs)]

    workloads = {
        "1q": [laya_requests(1, 1, 11)[0]],
        "3q": [laya_requests(1, 3, 12, long_state=True)[0]],
        "16x1q": laya_requests(16, 1, 13),
        "64x1q": laya_requests(64, 1, 14),
    }
    first = next(iter(engines))
    answers = {wl: ours(engines[first], bodies) for wl, bodies in workloads.items()}
    tokens = {wl: sum(r["usage"]["input_tokens"] for r in out) for wl, out in answers.items()}
    variants = {}
    if not args.no_laya:
        import laya

        agent = laya.Agent(args.checkpoint, device=args.device)
        for wl, bodies in workloads.items():
            if len(bodies) == 1:
                variants[("laya", wl)] = lambda b=bodies[0]: agent.system_one(b["state"], b["questions"])
            else:
                variants[("laya", wl)] = lambda b=bodies: agent.predict_batch(
                    [x["state"] for x in b], b[0]["questions"]
                )
    for label, engine in engines.items():
        for wl, bodies in workloads.items():
            variants[(label, wl)] = lambda e=engine, b=bodies: ours(e, b)

    parity = {}
    reference = [p for out in answers.values() for p in _probabilities(out)]
    for label, engine in engines.items():
        probs = [p for bodies in workloads.values() for p in _probabilities(ours(engine, bodies))]
        parity[label] = precision.gate_rows(probs, reference)
        print(
            "%-16s vs %s: drift %.2e, top choice %s"
            % (label, first, parity[label]["max_prob_drift"], parity[label]["top_choice_identical"]),
            flush=True,
        )

    times = _interleaved(variants, args.warmup, args.iters)
    report = {
        "device": info.device,
        "runtime": info.runtime,
        "tokens": tokens,
        "command": " ".join(sys.argv),
        "exports": exports,
        "parity_vs_first": parity,
        "results": {},
    }
    if not args.no_laya:
        report.update(laya=laya.__version__, laya_dtype=str(agent.dtype))
    for (who, wl), ts in times.items():
        r = {"p50_ms": nearest_rank(ts, 50), "p95_ms": nearest_rank(ts, 95), "mean_ms": statistics.fmean(ts)}
        report["results"]["%s/%s" % (who, wl)] = r
        print("%-16s %-6s p50 %7.2f ms  p95 %7.2f ms" % (who, wl, r["p50_ms"], r["p95_ms"]), flush=True)
    if args.kernels:
        report["gpu_kernels"] = _kernel_times(engines, workloads)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
