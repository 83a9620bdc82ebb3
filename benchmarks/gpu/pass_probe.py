"""Where one executor pass's time goes, on the server's own path (GPU machine).

    python -m benchmarks.gpu.pass_probe --export DIR [--rows 1,8,16,26,64] [--iters 200] [--workload F] [--out F]

For each batch of N one-question requests, the steps the executor thread takes, timed apart over
`--iters` passes (interleaved across batch sizes): the adapter's `pack`; for captured shapes the
copies of the feeds into the graph's buffers, the replay, and reading the outputs back; for
uncaptured ones the binding, the run and the outputs; then `unpack` (which calibrates). The GPU's
own kernel time per pass comes from CUPTI (benchmarks/gpu/cupti.py), so the host's share of a
pass is the rest. Each captured shape's replay is also compared with a plain run at that
shape (`replay_max_abs_diff`). Uses the server's settings (OMNI_CUDA_GRAPH_ROWS, OMNI_CUDA_GRAPHS,
OMNI_CUDA_GDN_PLAN), the same GraphRunner the executor runs and its batching policy's `pack`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import types
import warnings

import numpy as np


def _p50(xs: list[float]) -> float:
    return round(statistics.median(xs), 4)


def _run_part(runner, feeds: dict, static: bool) -> tuple[list, tuple[float, float, float]]:
    """One micro-batch's outputs and the seconds of its three steps: feeds in, run, outputs out.
    A captured shape replays its graph; a bucketed shape without one is captured first (as the
    executor does between passes; the warm-up passes take these), or runs uncaptured where its
    capture failed or the budget is spent (timed as the run, copies included); an uncaptured one
    is bound and run at its own shape; on a plain session (no graph policy, or OMNI_CUDA_GRAPHS=0
    on CUDA) the copies are part of the run."""
    from app.runtime import sessions

    if not isinstance(runner, sessions.GraphRunner):
        t0 = time.perf_counter()
        outputs = runner.run(None, feeds)
        return outputs, (0.0, time.perf_counter() - t0, 0.0)
    if static:
        entry = runner.graphs.get(runner.shape_key(feeds))
        if entry is None:
            t0 = time.perf_counter()
            runner.capture(feeds)
            outputs = runner.run(None, feeds)
            return outputs, (0.0, time.perf_counter() - t0, 0.0)
        t0 = time.perf_counter()
        entry.feed(feeds)
        t1 = time.perf_counter()
        entry.run()
        t2 = time.perf_counter()
        outputs = entry.results()
    else:
        t0 = time.perf_counter()
        io, _, options = runner._binding(feeds, -1)
        t1 = time.perf_counter()
        runner.session.run_with_iobinding(io, options)
        t2 = time.perf_counter()
        outputs = [v.numpy() for v in io.get_outputs()]
    return outputs, (t1 - t0, t2 - t1, time.perf_counter() - t2)


def _runner(model, device: str, settings) -> tuple:
    """(session info, what a pass runs on) for `model`, built as the executor builds it."""
    from app.runtime import sessions
    from models import gdn_plan

    policy = model.cuda_graphs  # which batches the executor captures (models.base.GraphPolicy)
    if device == "cpu":
        info = sessions.create(model.onnx_path, "cpu")
        # As on CUDA: a model with a graph policy runs bound through a GraphRunner, one without
        # (an older Clef-Flash export) on the plain session.
        runner = sessions.GraphRunner(info.session, 0, settings.cuda_graphs, device="cpu") if policy else info.session
        return info, runner
    # As the executor builds it (app/runtime/executor.py): the model's graph policy, the served
    # GatedDeltaNet engine.
    info = sessions.create(
        model.onnx_path,
        "cuda",
        cuda_graphs=settings.cuda_graphs if policy else 0,
        capture_after=policy.capture_after if policy else 1,
        gdn_plan=gdn_plan.plan_for(settings.cuda_gdn_plan, gdn_plan.gdn_dtype(model.manifest)),
    )
    return info, info.session


def _cases(model, rows: list[int], workload: str | None) -> dict:
    """{rows: (prepared requests, their works)}: each batch's requests drawn in turn from the
    JSONL `workload`, else laya_requests (laya_1q's generator)."""
    from benchmarks.make_workloads import laya_requests

    pool = None
    if workload:
        with open(workload, encoding="utf-8") as f:
            pool = [json.loads(line) for line in f if line.strip()]
    cases = {}
    for n in rows:
        bodies = laya_requests(n, 1, 20 + n) if pool is None else [pool[i % len(pool)] for i in range(n)]
        prepared = [model.prepare(b) for b in bodies]
        cases[n] = (prepared, [p.work for p in prepared])
    return cases


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--export", required=True)
    ap.add_argument("--rows", default="1,8,16,26,64")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument(
        "--workload",
        help="a JSONL workload to draw each batch's requests from, in turn "
        "(default: laya_requests, laya_1q's generator)",
    )
    ap.add_argument("--no-kernels", action="store_true", help="skip the CUPTI pass")
    ap.add_argument("--top", type=int, default=8, help="kernels listed per batch size, by GPU time")
    ap.add_argument(
        "--device",
        default="cuda",
        help="cpu: the same steps on ONNX Runtime's CPU kernels (a dry run of this script: the binding, no capture)",
    )
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")

    from app.config import Settings
    from app.runtime import sessions
    from app.runtime.batching import BatchPolicy
    from models.registry import load

    settings = Settings.from_env()
    model = load(args.export)
    info, runner = _runner(model, args.device, settings)
    # What the executor's batching policy packs against (app/runtime/registry.py's ModelSlot).
    graphs = isinstance(runner, sessions.GraphRunner)
    slot = types.SimpleNamespace(model=model, session=runner, static_shapes=graphs, bucketed=graphs)
    batching = BatchPolicy.from_settings(settings)
    cases = _cases(model, [int(x) for x in args.rows.split(",")], args.workload)

    def pack(n: int):
        """The pass as the executor packs it (app/runtime/batching.py), and whether its shape is
        bucketed for the runner's graphs (none with OMNI_CUDA_GRAPHS=0)."""
        packed, run = batching.pack(slot, cases[n][0])
        return packed, slot.static_shapes and run == runner.run

    def one(n: int, t: dict | None):
        works = cases[n][1]
        marks = [time.perf_counter()]
        packed, static = pack(n)
        marks.append(time.perf_counter())
        # Micro-batches (Packed.parts: the Qwen rows of like lengths, Clef-Flash's passes of records) run one
        # after another, as on the executor; each step's time is summed over them.
        spent, per_part = [0.0, 0.0, 0.0], []
        for part in packed.parts or [packed.feeds]:
            outputs, steps = _run_part(runner, part, static)
            per_part.append(outputs)
            spent = [a + b for a, b in zip(spent, steps)]
        outputs = per_part if packed.parts is not None else per_part[0]
        for step in spent:
            marks.append(marks[-1] + step)
        model.adapter.unpack(outputs, works, packed)
        marks.append(time.perf_counter())
        if t is not None:
            for stage, a, b in zip(("pack", "feeds_in", "run", "outputs_out", "unpack"), marks, marks[1:]):
                t[stage].append((b - a) * 1000.0)
            t["pass"].append((marks[-1] - marks[0]) * 1000.0)
        return packed, static

    timings = {n: {k: [] for k in ("pack", "feeds_in", "run", "outputs_out", "unpack", "pass")} for n in cases}
    for i in range(args.warmup + args.iters):
        for n in cases:
            one(n, timings[n] if i >= args.warmup else None)
    report = {
        "export": args.export,
        "runtime": info.runtime,
        "graph_rows": settings.cuda_graph_rows,
        "pinned": getattr(getattr(runner, "cuda", None), "path", None),
        "iters": args.iters,
        "cases": {},
    }
    for n in cases:
        packed, static = one(n, None)
        # Bucketed for capture is not captured: a capture ONNX Runtime refused (or the budget)
        # leaves the shape running uncaptured, whatever the policy asked.
        replayed = (
            static
            and isinstance(runner, sessions.GraphRunner)
            and all(runner.shape_key(feeds) in runner.graphs for feeds in packed.parts or [packed.feeds])
        )
        row = {
            "captured": replayed,
            "bucketed": static,
            "shape": list(packed.feeds["input_ids"].shape),
            "p50_ms": {k: _p50(v) for k, v in timings[n].items()},
        }
        if replayed:
            # The replay against a plain run at the same shape, on new data: the captured graph
            # reads and writes through its bound blocks (sessions.Captured), not its own buffers.
            again, _ = pack(n)
            row["replay_max_abs_diff"] = max(
                float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
                for feeds in again.parts or [again.feeds]
                for a, b in zip(runner.run(None, feeds), runner.run_uncaptured(None, feeds))
            )
        if not args.no_kernels and args.device != "cpu":
            from benchmarks.gpu.cupti import gpu_kernel_times

            try:
                k = gpu_kernel_times(lambda n=n: one(n, None), iters=10, top=args.top)
                row["gpu_busy_ms"], row["kernels_per_pass"], row["gpu_ms_by_kind"], row["top_kernels"] = (
                    k["gpu_busy_ms"],
                    k["kernels_per_call"],
                    k["by_kind_ms"],
                    k["top"],
                )
            except Exception as exc:  # no CUPTI: the host timings still stand
                row["gpu_error"] = repr(exc)[:300]
        report["cases"][str(n)] = row
        p = row["p50_ms"]
        print(
            "%3d rows %-10s %s  pass %.3f ms = pack %.3f + in %.3f + run %.3f + out %.3f + unpack %.3f; GPU %s ms %s%s"
            % (
                n,
                "captured" if replayed else "not captured" if static else "uncaptured",
                row["shape"],
                p["pass"],
                p["pack"],
                p["feeds_in"],
                p["run"],
                p["outputs_out"],
                p["unpack"],
                row.get("gpu_busy_ms"),
                row.get("gpu_ms_by_kind", ""),
                "; replay vs plain run max |diff| %.2e" % row["replay_max_abs_diff"] if replayed else "",
            ),
            flush=True,
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
