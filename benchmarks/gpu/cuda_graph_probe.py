"""Probe on the GPU: what IO binding, CUDA graphs and fp16 do to one Laya forward pass.

    python benchmarks/gpu/cuda_graph_probe.py EXPORT_DIR [--fp16-out DIR]

Variants at fixed shapes (1×96, 16×96 and 48×288 rows×tokens), 30 warm-up + 200 timed runs
each, interleaved: plain `session.run` with numpy in/out; IO binding with device-resident
inputs/outputs; IO binding + CUDA graph replay (`enable_cuda_graph`); and the same on an fp16
conversion of the graph when onnxconverter-common is importable.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort

ort.preload_dlls()


def feeds(batch, seq, markers=3, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(10, 1000, (batch, seq), dtype=np.int64)
    att = np.ones((batch, seq), dtype=np.int64)
    mpos = np.tile(np.arange(1, 1 + 2 * markers, 2, dtype=np.int64), (batch, 1))
    mmask = np.ones((batch, markers), dtype=bool)
    qtype = np.zeros((batch,), dtype=np.int64)
    return {"input_ids": ids, "attention_mask": att, "marker_pos": mpos, "marker_mask": mmask, "qtype": qtype}


def session(path, graph=False):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    opts = {"device_id": 0}
    if graph:
        opts["enable_cuda_graph"] = "1"
    return ort.InferenceSession(path, so, providers=[("CUDAExecutionProvider", opts)])


def timed(fn, warm=30, n=200):
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1000)
    ts.sort()
    return {"p50_ms": ts[len(ts) // 2], "p95_ms": ts[int(len(ts) * 0.95)], "mean_ms": statistics.fmean(ts)}


def bound_runner(sess, f, graph_id=None):
    io = sess.io_binding()
    vals = {k: ort.OrtValue.ortvalue_from_numpy(v, "cuda", 0) for k, v in f.items()}
    for k, v in vals.items():
        io.bind_ortvalue_input(k, v)
    for name in ("logits", "act_logits"):
        io.bind_output(name, "cuda", 0)
    ro = ort.RunOptions()
    if graph_id is not None:
        ro.add_run_config_entry("gpu_graph_id", str(graph_id))

    def run():
        for k, v in f.items():          # a new request's data into the same device buffers
            vals[k].update_inplace(v)
        sess.run_with_iobinding(io, ro)
        return [o.numpy() for o in io.get_outputs()]
    return run


def main():
    path = os.path.join(sys.argv[1], "model.onnx")
    report = {"ort": ort.__version__, "results": {}}
    plain = session(path)
    shapes = [(1, 96), (16, 96), (48, 288)]
    ref = {s: plain.run(None, feeds(*s)) for s in shapes}
    for s in shapes:
        f = feeds(*s)
        report["results"]["plain %dx%d" % s] = timed(lambda: plain.run(None, f))
        report["results"]["iobinding %dx%d" % s] = timed(bound_runner(plain, f))
    try:
        g = session(path, graph=True)
        for i, s in enumerate(shapes):
            f = feeds(*s)
            run = bound_runner(g, f, graph_id=i + 1)
            out = run()
            report["results"]["cudagraph %dx%d maxdiff" % s] = float(np.abs(out[0] - ref[s][0]).max())
            report["results"]["cudagraph %dx%d" % s] = timed(run)
    except Exception as exc:
        report["results"]["cudagraph error"] = str(exc)[:2000]
    try:
        from onnxconverter_common import float16
        import onnx

        t0 = time.time()
        m = onnx.load(path)
        m16 = float16.convert_float_to_float16(m, keep_io_types=True, disable_shape_infer=True,
                                               op_block_list=["Softmax", "TopK", "Log", "ReduceSum"])
        out16 = "/tmp/laya16/model.onnx"
        os.makedirs("/tmp/laya16", exist_ok=True)
        onnx.save(m16, out16, save_as_external_data=True, location="model.onnx.data")
        report["results"]["fp16 convert s"] = time.time() - t0
        s16 = session(out16)
        for s in shapes:
            f = feeds(*s)
            out = s16.run(None, f)
            p = lambda z: np.exp(z - z.max(-1, keepdims=True)) / np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True)
            report["results"]["fp16 %dx%d prob drift" % s] = float(np.abs(p(out[0]) - p(ref[s][0])).max())
            report["results"]["fp16 %dx%d" % s] = timed(lambda: s16.run(None, f))
        try:
            g16 = session(out16, graph=True)
            for i, s in enumerate(shapes):
                report["results"]["fp16+cudagraph %dx%d" % s] = timed(bound_runner(g16, feeds(*s), graph_id=i + 1))
        except Exception as exc:
            report["results"]["fp16 cudagraph error"] = str(exc)[:1000]
    except Exception as exc:
        report["results"]["fp16 error"] = str(exc)[:1000]
    print(json.dumps(report, indent=1))
    out = os.environ.get("OUT")
    if out:
        json.dump(report, open(os.path.join(out, "cuda_graph_probe.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
