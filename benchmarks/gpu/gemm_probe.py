"""What one matrix product of a Qwen3.5 layer costs on the GPU, by row count and by how it is
expressed: ONNX Runtime's fp16 MatMul (as exported), its Gemm with the weight transposed, its FP8
products (weight_fp8.py: `fp8w` MatMulBlockQuantizedFp8Weight over E4M3 weights in blocks of 128,
`fp8w_a8` the same with the activation rounded through E4M3, `gemm8` QuantizeLinear + GemmFloat8,
both operands E4M3), and torch's cuBLAS (cuBLASLt) beside them (`torch_fp8`: `torch._scaled_mm`
over E4M3, what the hardware gives FP8) (GPU machine). It tells whether an FP8 export
(`--dtype float8`) can shorten a pass before one is built.

    python -m benchmarks.gpu.gemm_probe [--dims 4b] [--rows 120,128,144,160,224,256] [--copies 8] [--out F]
    python -m benchmarks.gpu.gemm_probe --dims 27b --rows 1024,2048 --copies 4 --forms matmul3d,gemm8,torch_fp8
    python -m benchmarks.gpu.gemm_probe --device cpu --dims tiny --forms matmul3d,gemm_t   # a dry run here

Each (rows, K, N, form) gets its own graph of `--copies` independent products with their own
weights (so no weight stays in L2 between products, as in the model), fed from graph inputs, so
every kernel is the product's own (cuBLAS's split-K reductions included). The GPU time per
product comes from CUPTI (benchmarks/gpu/cupti.py). `predicted_model_ms` weighs each shape by
how often a one-row pass runs it (the served export: separate products per part). On the GPU
each ONNX Runtime form's first product is checked against numpy's (`max_rel_err`, relative to
its largest value). `--device cpu` times ONNX Runtime's CPU kernels on the host clock instead,
and checks each graph's products against numpy's: a dry run of the script (no CUDA, no torch
forms, no FP8 forms: ONNX Runtime has no CPU kernel for them at fp16).
"""

from __future__ import annotations

import argparse
import json
import os
import warnings

import numpy as np

from benchmarks.gpu import weight_fp8

# (K, N): how many times a one-row pass of each model runs it (separate projections; graph.py).
SHAPES = {
    "4b": {  # 24 GatedDeltaNet + 8 attention layers, hidden 2560, MLP 9216
        (2560, 9216): 64,
        (9216, 2560): 32,  # MLP gate, up; down
        (2560, 8192): 24,
        (2560, 4096): 24 + 16,
        (2560, 64): 24,
        (4096, 2560): 32,  # GDN; attn q, gate; outs
        (2560, 1024): 16,  # attention k, v
    },
    "27b": {  # 48 GatedDeltaNet + 16 attention layers, hidden 5120, MLP 17408
        (5120, 17408): 128,
        (17408, 5120): 64,  # MLP gate, up; down
        (5120, 10240): 48,
        (5120, 6144): 48 + 32,
        (5120, 96): 48,
        (6144, 5120): 64,  # GDN; attn q, gate; outs
        (5120, 1024): 32,  # attention k, v
    },
    "tiny": {(128, 256): 2, (256, 128): 1},  # the CPU dry run's (K a multiple of 128)
}
FP8_FORMS = ("fp8w", "fp8w_a8", "gemm8")
E4M3_ACTIVATIONS = ("fp8w_a8", "gemm8")  # the forms that round the activation through E4M3 too
# The activation's E4M3 scale in the W8A8 forms: the probe's inputs are standard normal, so
# |x| <= 6 (448 × this) holds for all but ~1 in 10^9 of them.
ACT_SCALE = 6.0 / weight_fp8.E4M3_MAX


def weights(k: int, n: int, copies: int, seed: int = 0) -> list[np.ndarray]:
    """The `copies` fp16 [K, N] weights of one graph (scaled so the products stay near 1)."""
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((k, n), dtype=np.float32) * k**-0.5).astype(np.float16) for _ in range(copies)]


def weight_bytes(form: str) -> float:
    """Bytes a weight value takes in the form's graph (what its products read)."""
    return 1.0 if form in FP8_FORMS + ("torch_fp8",) else 2.0


def three_d(form: str) -> bool:
    """Whether the form's input is [1, rows, K], as the exported model's are."""
    return form in ("matmul3d", "fp8w", "fp8w_a8")


def reference_weight(w: np.ndarray, form: str) -> np.ndarray:
    """The fp32 weight a form's graph multiplies by: the quantized one for the FP8 forms."""
    if form.startswith("fp8w"):
        return weight_fp8.dequantize(*weight_fp8.quantize_blocks(w))
    if form == "gemm8":
        return weight_fp8.dequantize(*weight_fp8.quantize_tensor(w), block=None)
    return w.astype(np.float32)


def reference_products(x: np.ndarray, w: np.ndarray, form: str) -> np.ndarray:
    """What a form's product of x [rows, K] and w gives, in fp32 (W8A8 forms round x too)."""
    if form in E4M3_ACTIVATIONS:
        x = weight_fp8.round_activation(x, ACT_SCALE)
    return x.astype(np.float32) @ reference_weight(w, form)


def onnx_products(rows: int, k: int, n: int, copies: int, form: str, seed: int = 0) -> bytes:
    import onnx  # noqa: F401  (helper's package)
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, outs = [], [], []
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, rows, k] if three_d(form) else [rows, k])
    if form in E4M3_ACTIVATIONS:
        inits.append(numpy_helper.from_array(np.array(ACT_SCALE, np.float32), "a_scale"))
    if form == "gemm8":  # one cast of the activation serves every product, as in a layer
        inits += [
            numpy_helper.from_array(np.array(ACT_SCALE, np.float16), "a_scale16"),
            weight_fp8.initializer("a_zero", np.zeros((), weight_fp8.E4M3)),
        ]
        nodes.append(helper.make_node("QuantizeLinear", ["x", "a_scale16", "a_zero"], ["x8"]))
    for i, w in enumerate(weights(k, n, copies, seed)):
        if form.startswith("fp8w"):
            q, scale = weight_fp8.quantize_blocks(w)
            inits += [weight_fp8.initializer("w%d" % i, q), numpy_helper.from_array(scale, "s%d" % i)]
            ins = ["x", "w%d" % i, "s%d" % i] + (["a_scale"] if form == "fp8w_a8" else [])
            nodes.append(
                helper.make_node(
                    "MatMulBlockQuantizedFp8Weight",
                    ins,
                    ["y%d" % i],
                    domain="com.microsoft",
                    block_size=weight_fp8.BLOCK,
                )
            )
        elif form == "gemm8":
            q, scale = weight_fp8.quantize_tensor(w)
            inits += [weight_fp8.initializer("w%d" % i, q), numpy_helper.from_array(np.array(scale), "s%d" % i)]
            nodes.append(
                helper.make_node(
                    "GemmFloat8",
                    ["x8", "w%d" % i, "", "a_scale", "s%d" % i],
                    ["y%d" % i],
                    domain="com.microsoft",
                    transB=1,
                    dtype=TensorProto.FLOAT16,
                )
            )
        elif form == "gemm_t":
            inits.append(numpy_helper.from_array(np.ascontiguousarray(w.T), "w%d" % i))
            nodes.append(helper.make_node("Gemm", ["x", "w%d" % i], ["y%d" % i], transB=1))
        else:
            inits.append(numpy_helper.from_array(w, "w%d" % i))
            nodes.append(helper.make_node("MatMul", ["x", "w%d" % i], ["y%d" % i]))
        shape = [1, rows, n] if three_d(form) else [rows, n]
        outs.append(helper.make_tensor_value_info("y%d" % i, TensorProto.FLOAT16, shape))
    graph = helper.make_graph(nodes, "products", [x], outs, inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 19), helper.make_opsetid("com.microsoft", 1)]
    )
    model.ir_version = 9  # FLOAT8E4M3FN needs IR 9 and opset 19
    return model.SerializeToString()


def time_ort(rows, k, n, copies, form, iters):
    import onnxruntime as ort
    import torch

    from benchmarks.gpu.cupti import gpu_kernel_times

    so = ort.SessionOptions()
    # Builds with DeepGEMM run W8A8 blocks of 128 as native FP8 products on SM90 when asked;
    # others ignore it (the top kernels' names say which ran).
    os.environ["ORT_FP8_MATMUL_DEEPGEMM"] = "1" if form == "fp8w_a8" else "0"
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
    torch.cuda.synchronize()
    want = reference_products(x.reshape(rows, k).float().cpu().numpy(), weights(k, n, 1)[0], form)
    err = float(np.abs(outs[0].reshape(rows, n).float().cpu().numpy() - want).max() / np.abs(want).max())
    t = gpu_kernel_times(lambda: sess.run_with_iobinding(b), iters=iters, top=4)
    return t["gpu_busy_ms"] / copies, t["kernels_per_call"] / copies, t["top"][:2], err


def time_ort_cpu(rows, k, n, copies, form, iters):
    """The same graph on ONNX Runtime's CPU kernels, host-timed; each product checked against numpy."""
    import time

    import onnxruntime as ort

    if form in FP8_FORMS:
        raise SystemExit("%s needs the GPU: ONNX Runtime has no CPU kernel for it at fp16" % form)
    sess = ort.InferenceSession(onnx_products(rows, k, n, copies, form), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((rows, k)).astype(np.float16)
    feed = {"x": x[None] if three_d(form) else x}
    outs = sess.run(None, feed)
    for y, w in zip(outs, weights(k, n, copies)):
        want = reference_products(x, w, form)
        if not np.allclose(y.reshape(rows, n).astype(np.float32), want, atol=2e-2, rtol=2e-2):
            raise RuntimeError("%s %dx%d at %d rows disagrees with numpy" % (form, k, n, rows))
    t0 = time.perf_counter()
    for _ in range(iters):
        sess.run(None, feed)
    ms = (time.perf_counter() - t0) * 1e3 / iters / copies
    return ms, None, [("cpu", ms, 1)], None


def time_torch(rows, k, n, copies, iters, layout):
    import torch

    from benchmarks.gpu.cupti import gpu_kernel_times

    x = torch.randn(rows, k, device="cuda", dtype=torch.float16)
    if layout == "fp8":  # E4M3 operands, one fp32 scale each; the cast of x once a call
        e4m3 = torch.float8_e4m3fn
        inv = torch.tensor(1 / ACT_SCALE, device="cuda", dtype=torch.float16)
        sa = torch.tensor(ACT_SCALE, device="cuda")
        ws = [
            (torch.randn(n, k, device="cuda") * k**-0.5 / (4 * k**-0.5 / weight_fp8.E4M3_MAX)).to(e4m3)
            for _ in range(copies)
        ]
        sb = torch.tensor(4 * k**-0.5 / weight_fp8.E4M3_MAX, device="cuda")
        run = lambda: [  # noqa: E731
            torch._scaled_mm(x8, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.float16)
            for x8 in [(x * inv).to(e4m3)]
            for w in ws
        ]
    elif layout == "linear":  # weight [N, K], as nn.Linear keeps it
        ws = [torch.randn(n, k, device="cuda", dtype=torch.float16) * k**-0.5 for _ in range(copies)]
        run = lambda: [torch.nn.functional.linear(x, w) for w in ws]  # noqa: E731
    else:
        ws = [torch.randn(k, n, device="cuda", dtype=torch.float16) * k**-0.5 for _ in range(copies)]
        run = lambda: [x @ w for w in ws]  # noqa: E731
    t = gpu_kernel_times(run, iters=iters, top=4)
    return t["gpu_busy_ms"] / copies, t["kernels_per_call"] / copies, t["top"][:2], None


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
                    ms, kern, top, err = time_ort_cpu(rows, k, n, args.copies, form, args.iters)
                elif form.startswith("torch_"):
                    ms, kern, top, err = time_torch(rows, k, n, args.copies, args.iters, form[6:])
                else:
                    ms, kern, top, err = time_ort(rows, k, n, args.copies, form, args.iters)
                total += ms * count
                gbs = weight_bytes(form) * k * n / (ms * 1e-3) / 1e9
                results.append(
                    {
                        "rows": rows,
                        "form": form,
                        "k": k,
                        "n": n,
                        "ms": round(ms, 4),
                        "kernels": kern,
                        "weight_gb_s": round(gbs),
                        "top": top,
                        "max_rel_err": err,
                    }
                )
                print(
                    "rows %4d %-13s %5dx%-5d %.4f ms  %s kernels  %5.0f GB/s  err %s  %s"
                    % (rows, form, k, n, ms, kern, gbs, "-" if err is None else "%.1e" % err, top[0][0][:60]),
                    flush=True,
                )
            results.append({"rows": rows, "form": form, "predicted_model_ms": round(total, 3)})
            print("rows %4d %-13s predicted one-row pass products: %.3f ms" % (rows, form, total), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
