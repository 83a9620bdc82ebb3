"""How the thread that runs a pass waits for the GPU, and what its next host step costs after (GPU machine).

    python -m benchmarks.gpu.sync_probe [--modes auto,spin,blocking,yield] [--rounds 2] [--pass-ms 6.5]

One process per CUDA scheduling mode (app/runtime/cuda_sync.py), in turn, `--rounds` times. Each
builds a synthetic ONNX graph (a chain of fp16 matrix products sized to take about `--pass-ms`),
creates its session through the server's own `sessions.create` (CUDA graphs and pinned copies as
served), and times `--iters` runs, each after `--gap-ms` asleep (the executor waiting for its next
job at c=1). For each run: its wall time, the thread's CPU time inside it (≈ the wall time when
the thread spins in the synchronize, ≈ 0 when it sleeps) and a fixed host step right after it (a
numpy softmax, a dict and a JSON dump, like a request's `finish`), against the same step run
twice back to back (`warm`). Prints one JSON line per process and a table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _graph(path: str, layers: int, rows: int, width: int) -> None:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float16), "w")
    nodes, prev = [], "x"
    for i in range(layers):
        nodes.append(helper.make_node("MatMul", [prev, "w"], ["m%d" % i]))
        nodes.append(helper.make_node("Tanh", ["m%d" % i], ["t%d" % i]))
        prev = "t%d" % i
    nodes.append(helper.make_node("ReduceMean", [prev], ["y"], axes=[1], keepdims=0))
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [rows, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [rows])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), path)


def _host_step(logits) -> str:
    """A request's `finish` in small: a softmax, an answer dict, its JSON."""
    import numpy as np

    z = np.exp(logits - logits.max())
    p = z / z.sum()
    answer = {"q%d" % i: {"choice": chr(65 + int(np.argmax(p[i::8]))), "probabilities": p[i::8].tolist()}
              for i in range(8)}
    return json.dumps({"answers": answer, "usage": {"input_tokens": 218}})


def child(mode: str, layers: int, rows: int, width: int, iters: int, gap_ms: float) -> dict:
    import numpy as np

    from app.runtime import cuda_sync, sessions

    note = cuda_sync.apply(mode, 0)
    path = os.path.join(tempfile.mkdtemp(), "chain.onnx")
    _graph(path, layers, rows, width)
    info = sessions.create(path, "cuda", cuda_graphs=4, capture_after=1)
    feeds = {"x": np.random.default_rng(1).standard_normal((rows, width)).astype(np.float16)}
    logits = np.random.default_rng(2).standard_normal(64)
    for _ in range(20):
        info.session.run(None, feeds)
    wall, cpu, after, warm = [], [], [], []
    for _ in range(iters):
        time.sleep(gap_ms / 1000)
        c0, t0 = time.thread_time(), time.perf_counter()
        info.session.run(None, feeds)
        t1, c1 = time.perf_counter(), time.thread_time()
        _host_step(logits)
        t2 = time.perf_counter()
        _host_step(logits)
        t3 = time.perf_counter()
        wall.append(t1 - t0)
        cpu.append(c1 - c0)
        after.append(t2 - t1)
        warm.append(t3 - t2)
    med = statistics.median
    return {"mode": mode, "applied": note, "run_ms": round(med(wall) * 1e3, 3),
            "run_cpu_share": round(sum(cpu) / sum(wall), 3),
            "step_after_us": round(med(after) * 1e6, 1), "step_warm_us": round(med(warm) * 1e6, 1),
            "step_after_p90_us": round(sorted(after)[int(0.9 * len(after))] * 1e6, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modes", default="auto,spin,blocking,yield")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--layers", type=int, default=0, help="matrix products a pass (0: sized to --pass-ms)")
    ap.add_argument("--pass-ms", type=float, default=6.5)
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--gap-ms", type=float, default=1.5)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.layers, args.rows, args.width, args.iters, args.gap_ms)), flush=True)
        return
    layers = args.layers
    if not layers:
        # Size the chain on one process in `auto` mode from a 40-product probe.
        probe = _run_child("auto", 40, args, iters=30)
        layers = max(1, round(40 * args.pass_ms / probe["run_ms"]))
    rows = []
    for r in range(args.rounds):
        for mode in args.modes.split(","):
            out = _run_child(mode, layers, args)
            out["round"] = r + 1
            rows.append(out)
            print(json.dumps(out), flush=True)
    print("\n%d products of %dx%d a pass; %d runs a process, %.1f ms asleep before each" %
          (layers, args.rows, args.width, args.iters, args.gap_ms))
    print("| mode (round) | run ms | thread CPU / run | step after the run µs (p90) | same step warm µs |")
    print("|---|---|---|---|---|")
    for row in rows:
        print("| %s (%d) | %.3f | %.2f | %.1f (%.1f) | %.1f |" % (row["mode"], row["round"], row["run_ms"],
              row["run_cpu_share"], row["step_after_us"], row["step_after_p90_us"], row["step_warm_us"]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"layers": layers, "rows": rows, "args": vars(args)}, f, indent=1)


def _run_child(mode: str, layers: int, args, iters: int | None = None) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.gpu.sync_probe", "--child", mode, "--layers", str(layers),
           "--rows", str(args.rows), "--width", str(args.width), "--iters", str(iters or args.iters),
           "--gap-ms", str(args.gap_ms)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit("%s failed:\n%s" % (" ".join(cmd), done.stderr[-3000:]))
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
