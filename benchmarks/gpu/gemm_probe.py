"""What one fp16 matrix product of a Qwen3.5 layer costs on the GPU, by row count and by how it is
expressed: ONNX Runtime's MatMul (as exported), its Gemm with the weight transposed, its
MatMulNBits over 8- or 4-bit weights (`nbits8`, `nbits4`: the CUTLASS mixed-input GEMM, which
the session option `ep.cuda.fpa_intb_gemm` turns on; `nbits8_plain`: without it), and torch's
cuBLAS (cuBLASLt) beside them (GPU machine).

    python -m benchmarks.gpu.gemm_probe [--dims 4b] [--rows 120,128,144,160,224,256] [--copies 8] [--out F]
    python -m benchmarks.gpu.gemm_probe --device cpu --dims tiny --forms matmul3d,gemm_t,nbits8,nbits4   # a dry run here

Each (rows, K, N, form) gets its own graph of `--copies` independent products with their own
weights (so no weight stays in L2 between products, as in the model), fed from graph inputs, so
every kernel is the product's own (cuBLAS's split-K reductions included). The GPU time per
product comes from CUPTI (benchmarks/gpu/cupti.py). `predicted_model_ms` weighs each shape by
how often a one-row pass runs it (the served export: separate products per part). `--device
cpu` times ONNX Runtime's CPU kernels on the host clock instead, and checks each graph's
products against numpy's: a dry run of the script (no CUDA, no torch forms).
"""
from __future__ import annotations

import argparse
import json
import warnings

import numpy as np

from benchmarks.gpu import weight_bits

# (K, N): how many times a one-row pass of each model runs it (separate projections; graph.py).
SHAPES = {
    "4b": {  # 24 GatedDeltaNet + 8 attention layers, hidden 2560, MLP 9216
        (2560, 9216): 64, (9216, 2560): 32,                  # MLP gate, up; down
        (2560, 8192): 24, (2560, 4096): 24 + 16, (2560, 64): 24, (4096, 2560): 32,   # GDN; attn q, gate; outs
        (2560, 1024): 16,                                    # attention k, v
    },
    "tiny": {(64, 96): 2, (96, 64): 1},                      # the CPU dry run's
}


def weights(k: int, n: int, copies: int, seed: int = 0) -> list[np.ndarray]:
    """The `copies` fp16 [K, N] weights of one graph (scaled so the products stay near 1)."""
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((k, n), dtype=np.float32) * k ** -0.5).astype(np.float16) for _ in range(copies)]


def nbits(form: str) -> int:
    """The weight bits of a MatMulNBits form (0 for the fp16 forms)."""
    return int(form[5]) if form.startswith("nbits") else 0


def three_d(form: str) -> bool:
    """Whether the form's input is [1, rows, K], as the exported model's are."""
    return form == "matmul3d" or nbits(form) > 0


def reference_weight(w: np.ndarray, form: str) -> np.ndarray:
    """The fp32 weight a form's graph multiplies by: the quantized one for MatMulNBits."""
    bits = nbits(form)
    return weight_bits.dequantize(*weight_bits.quantize(w, bits), bits, w.shape[0]) if bits else w.astype(np.float32)


def onnx_products(rows: int, k: int, n: int, copies: int, form: str, seed: int = 0) -> bytes:
    import onnx  # noqa: F401  (helper's package)
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, outs = [], [], []
    bits = nbits(form)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, rows, k] if three_d(form) else [rows, k])
    for i, w in enumerate(weights(k, n, copies, seed)):
        if bits:
            packed, scale = weight_bits.quantize(w, bits)
            inits += [numpy_helper.from_array(packed, "w%d" % i), numpy_helper.from_array(scale, "s%d" % i)]
            nodes.append(helper.make_node("MatMulNBits", ["x", "w%d" % i, "s%d" % i], ["y%d" % i],
                                          domain="com.microsoft", **weight_bits.node_attrs(k, n, bits)))
        elif form == "gemm_t":
            inits.append(numpy_helper.from_array(np.ascontiguousarray(w.T), "w%d" % i))
            nodes.append(helper.make_node("Gemm", ["x", "w%d" % i], ["y%d" % i], transB=1))
        else:
            inits.append(numpy_helper.from_array(w, "w%d" % i))
            nodes.append(helper.make_node("MatMul", ["x", "w%d" % i], ["y%d" % i]))
        shape = [1, rows, n] if three_d(form) else [rows, n]
        outs.append(helper.make_tensor_value_info("y%d" % i, TensorProto.FLOAT16, shape))
    graph = helper.make_graph(nodes, "products", [x], outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model.SerializeToString()


def time_ort(rows, k, n, copies, form, iters):
    import onnxruntime as ort
    import torch

    from benchmarks.gpu.cupti import gpu_kernel_times

    so = ort.SessionOptions()
    if nbits(form) and not form.endswith("_plain"):
        so.add_session_config_entry("ep.cuda.fpa_intb_gemm", "1")
    sess = ort.InferenceSession(onnx_products(rows, k, n, copies, form), so, providers=["CUDAExecutionProvider"])
    shape = [1, rows, k] if three_d(form) else [rows, k]
    x = torch.randn(*shape, device="cuda", dtype=torch.float16)
    outs = [torch.empty(*(shape[:-1] + [n]), device="cuda", dtype=torch.float16) for _ in range(copies)]
    b = sess.io_binding()
    b.bind_input("x", "cuda", 0, np.float16, list(x.shape), x.data_ptr())
    for i, o in enumerate(outs):
        b.bind_output("y%d" % i, "cuda", 0, np.float16, list(o.shape), o.data_ptr())
    for _ in range(3):
        sess.run_with_iobinding(b)
    t = gpu_kernel_times(lambda: sess.run_with_iobinding(b), iters=iters, top=4)
    return t["gpu_busy_ms"] / copies, t["kernels_per_call"] / copies, t["top"][:2]


def time_ort_cpu(rows, k, n, copies, form, iters):
    """The same graph on ONNX Runtime's CPU kernels, host-timed; each product checked against numpy."""
    import time

    import onnxruntime as ort

    sess = ort.InferenceSession(onnx_products(rows, k, n, copies, form), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((rows, k)).astype(np.float16)
    feed = {"x": x[None] if three_d(form) else x}
    outs = sess.run(None, feed)
    for y, w in zip(outs, weights(k, n, copies)):
        want = x.astype(np.float32) @ reference_weight(w, form)
        if not np.allclose(y.reshape(rows, n).astype(np.float32), want, atol=2e-2, rtol=2e-2):
            raise RuntimeError("%s %dx%d at %d rows disagrees with numpy" % (form, k, n, rows))
    t0 = time.perf_counter()
    for _ in range(iters):
        sess.run(None, feed)
    ms = (time.perf_counter() - t0) * 1e3 / iters / copies
    return ms, None, [("cpu", ms, 1)]


def time_torch(rows, k, n, copies, iters, layout):
    import torch

    from benchmarks.gpu.cupti import gpu_kernel_times

    x = torch.randn(rows, k, device="cuda", dtype=torch.float16)
    if layout == "linear":      # weight [N, K], as nn.Linear keeps it
        ws = [torch.randn(n, k, device="cuda", dtype=torch.float16) * k ** -0.5 for _ in range(copies)]
        run = lambda: [torch.nn.functional.linear(x, w) for w in ws]   # noqa: E731
    else:
        ws = [torch.randn(k, n, device="cuda", dtype=torch.float16) * k ** -0.5 for _ in range(copies)]
        run = lambda: [x @ w for w in ws]                              # noqa: E731
    t = gpu_kernel_times(run, iters=iters, top=4)
    return t["gpu_busy_ms"] / copies, t["kernels_per_call"] / copies, t["top"][:2]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dims", default="4b", choices=sorted(SHAPES))
    ap.add_argument("--rows", default="120,128,144,160,224,256")
    ap.add_argument("--forms", default="matmul3d,gemm_t,torch_linear,torch_mm")
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    shapes = SHAPES[args.dims]
    results = []
    for rows in [int(r) for r in args.rows.split(",")]:
        for form in args.forms.split(","):
            total = 0.0
            for (k, n), count in shapes.items():
                if args.device == "cpu":
                    if form.startswith("torch_"):
                        raise SystemExit("--device cpu times ONNX Runtime's forms only")
                    ms, kern, top = time_ort_cpu(rows, k, n, args.copies, form, args.iters)
                elif form.startswith("torch_"):
                    ms, kern, top = time_torch(rows, k, n, args.copies, args.iters, form[6:])
                else:
                    ms, kern, top = time_ort(rows, k, n, args.copies, form, args.iters)
                total += ms * count
                gbs = 2 * k * n / (ms * 1e-3) / 1e9
                results.append({"rows": rows, "form": form, "k": k, "n": n, "ms": round(ms, 4),
                                "kernels": kern, "weight_gb_s": round(gbs), "top": top})
                print("rows %4d %-13s %5dx%-5d %.4f ms  %s kernels  %5.0f GB/s  %s"
                      % (rows, form, k, n, ms, kern, gbs, top[0][0][:60]), flush=True)
            results.append({"rows": rows, "form": form, "predicted_model_ms": round(total, 3)})
            print("rows %4d %-13s predicted one-row pass products: %.3f ms" % (rows, form, total), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
