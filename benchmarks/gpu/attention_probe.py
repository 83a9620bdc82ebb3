"""What one of Laya's attention layers costs on the GPU beside one of its matrix products, by the
batch row length T that a packed pass attends over (GPU machine).

    python -m benchmarks.gpu.attention_probe [--tokens 8192] [--lengths 128,256,512] [--out F]
    python -m benchmarks.gpu.attention_probe --device cpu --tokens 512 --lengths 64,128   # a dry run here

Laya's encoder runs com.microsoft MultiHeadAttention with an additive attention bias [B, 1, T, T]
that keeps each query to its own packed row (models/laya/encoder.py), so every query attends
over its whole batch row of T columns, however short its own row. For `--tokens` tokens in
batch rows of each length T, in fp16 with ModernBERT-large's 16 heads of 64, it times:

* `bias`: MultiHeadAttention with the [B, 1, T, T] bias, as exported;
* `no_bias`: the same without a bias (the flash kernels ONNX Runtime picks where nothing is masked);
* `matmul`: one [tokens, 1024] x [1024, 1024] product (the attention output's projection), the
  unit a layer's four projections and MLP are multiples of (about 11.6 of them a layer);
* `packed` (GPU only): the same rows' real tokens without padding, [N, D], through
  PackedMultiHeadAttention with each row's start (`cumulative_sequence_length`), so each query
  attends over its own row alone; `packed_window` adds the sliding layers' band as a broadcast
  [1, 1, S, S] bias. Its output is checked against numpy's attention row by row.

Each graph is fed from CUDA-resident inputs (IO binding); the GPU time per call comes from
CUPTI (benchmarks/gpu/cupti.py), the wall time per call beside it. `--device cpu` runs the same
graphs on ONNX Runtime's CPU kernels and checks the bias graph against numpy's attention.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from benchmarks.gpu.bound_graph import bound, runtime

HEADS, HEAD_DIM = 16, 64
D = HEADS * HEAD_DIM


def _graph(kind: str, dtype) -> bytes:
    from onnx import TensorProto, helper

    elem = TensorProto.FLOAT16 if dtype == np.float16 else TensorProto.FLOAT
    if kind.startswith("packed"):
        names = ["q", "k", "v", "", "token_offset", "cu_seqlens"]
        inputs = [helper.make_tensor_value_info(n, elem, ["N", D]) for n in ("q", "k", "v")]
        inputs += [
            helper.make_tensor_value_info("token_offset", TensorProto.INT32, ["B", "S"]),
            helper.make_tensor_value_info("cu_seqlens", TensorProto.INT32, ["B1"]),
        ]
        if kind == "packed_window":
            names.append("bias")
            inputs.append(helper.make_tensor_value_info("bias", elem, [1, 1, "S", "S"]))
        nodes = [
            helper.make_node(
                "PackedMultiHeadAttention", names, ["y"], domain="com.microsoft", num_heads=HEADS, scale=HEAD_DIM**-0.5
            )
        ]
    elif kind == "matmul":
        nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
        inputs = [helper.make_tensor_value_info("x", elem, ["N", D]), helper.make_tensor_value_info("w", elem, [D, D])]
    else:
        names = ["q", "k", "v", "", "", "bias" if kind == "bias" else ""]
        while names and not names[-1]:
            names.pop()
        nodes = [
            helper.make_node(
                "MultiHeadAttention", names, ["y"], domain="com.microsoft", num_heads=HEADS, scale=HEAD_DIM**-0.5
            )
        ]
        inputs = [helper.make_tensor_value_info(n, elem, ["B", "T", D]) for n in ("q", "k", "v")]
        if kind == "bias":
            inputs.append(helper.make_tensor_value_info("bias", elem, ["B", 1, "T", "T"]))
    out = [helper.make_tensor_value_info("y", elem, None)]
    model = helper.make_model(
        helper.make_graph(nodes, kind, inputs, out),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
    )
    model.ir_version = 9
    return model.SerializeToString()


def _segments(b: int, t: int, rng) -> list[list[tuple[int, int]]]:
    """Per batch row, (start, length) of rows of 16 to T/2 tokens packed side by side; the rest
    of the batch row is padding."""
    out = []
    for _ in range(b):
        spans, at = [], 0
        while at < t:
            n = int(rng.integers(16, max(17, t // 2)))
            if at + n > t:
                break
            spans.append((at, n))
            at += n
        out.append(spans)
    return out


def _segment_bias(segments: list[list[tuple[int, int]]], t: int, dtype) -> np.ndarray:
    """[B, 1, T, T] as encoder.segment_bias makes it: 0 within a row, -1e4 elsewhere."""
    bias = np.full((len(segments), 1, t, t), -1.0e4, dtype=np.float32)
    for i, spans in enumerate(segments):
        for at, n in spans:
            bias[i, 0, at : at + n, at : at + n] = 0.0
    return bias.astype(dtype)


def _packed_layout(lengths: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(token_offset [B, S], cumulative_sequence_length [B + 1]) for sequences of `lengths`
    packed end to end, S the longest: token_offset lists, in packed order, each real token's
    index in the padded [B, S] layout, then the padded positions (ONNX Runtime's convention)."""
    s = max(lengths)
    real = [b * s + i for b, n in enumerate(lengths) for i in range(n)]
    pad = [b * s + i for b, n in enumerate(lengths) for i in range(n, s)]
    offset = np.array(real + pad, dtype=np.int32).reshape(len(lengths), s)
    return offset, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def _window(s: int, half: int, dtype) -> np.ndarray:
    pos = np.arange(s)
    return np.where(np.abs(pos[:, None] - pos[None, :]) > half, -1.0e4, 0.0).astype(dtype)[None, None]


HALF_WINDOW = 64  # ModernBERT-large's local_attention of 128, either side


def _reference(q, k, v, bias) -> np.ndarray:
    b, t, _ = q.shape
    split = lambda x: x.astype(np.float32).reshape(b, t, HEADS, HEAD_DIM).transpose(0, 2, 1, 3)  # noqa: E731
    s = split(q) @ split(k).transpose(0, 1, 3, 2) * HEAD_DIM**-0.5 + bias.astype(np.float32)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p @ split(v)).transpose(0, 2, 1, 3).reshape(b, t, D)


def _packed_cases(timed, report: dict, q, k, v, segments, t: int, dtype) -> None:
    """The `packed` and `packed_window` cases for the real tokens of one batch row length's rows."""
    spans = [(i, at, n) for i, row_spans in enumerate(segments) for at, n in row_spans]
    lengths = [n for _, _, n in spans]
    offset, cu = _packed_layout(lengths)
    feeds = {"token_offset": offset, "cu_seqlens": cu}
    for name, x in (("q", q), ("k", k), ("v", v)):
        feeds[name] = np.concatenate([x[i, at : at + n] for i, at, n in spans])
    window = _window(max(lengths), HALF_WINDOW, dtype)
    for kind in ("packed", "packed_window"):
        extra = {"bias": window} if kind == "packed_window" else {}
        try:
            row, out = timed(kind, {**feeds, **extra})
        except Exception as exc:  # an op or shape this onnxruntime build does not take
            report["cases"].append({"kind": kind, "T": t, "error": str(exc)[:400]})
            print("%-8s T=%4d: %s" % (kind, t, str(exc)[:200]))
            continue
        err = 0.0
        for j in range(min(8, len(spans))):
            lo, n = int(cu[j]), lengths[j]
            part = [x[None, lo : lo + n] for x in (feeds["q"], feeds["k"], feeds["v"])]
            ref = _reference(*part, (extra["bias"][..., :n, :n] if extra else np.zeros((1, 1, n, n))))
            err = max(err, float(np.abs(out[lo : lo + n].astype(np.float32) - ref[0]).max()))
        row.update(max_abs_err=err, rows=len(lengths), real_tokens=int(cu[-1]))
        report["cases"].append({"kind": kind, "T": t, **row})
        print("%-8s T=%4d N=%5d: %s" % (kind, t, int(cu[-1]), {k: v for k, v in row.items() if k != "kernels"}))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--lengths", default="128,256,512")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    cuda, dtype = runtime(args.device)
    rng = np.random.default_rng(0)
    report = {"tokens": args.tokens, "dtype": np.dtype(dtype).name, "device": args.device, "cases": []}

    def timed(kind: str, feeds: dict) -> dict:
        run, binding = bound(_graph(kind, dtype), feeds, ["y"], cuda)
        t0 = time.perf_counter()
        for _ in range(args.iters):
            run()
        row = {"wall_ms": round((time.perf_counter() - t0) / args.iters * 1e3, 4)}
        if cuda:
            from benchmarks.gpu.cupti import gpu_kernel_times

            k = gpu_kernel_times(run, iters=10, top=4)
            row.update(gpu_ms=k["gpu_busy_ms"], kernels=k["top"])
        return row, binding.copy_outputs_to_cpu()[0]

    x = rng.standard_normal((args.tokens, D)).astype(dtype)
    w = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(dtype)
    row, _ = timed("matmul", {"x": x, "w": w})
    report["cases"].append({"kind": "matmul", "T": None, **row})
    print("matmul [%d, %d] x [%d, %d]: %s" % (args.tokens, D, D, D, row))
    for t in [int(v) for v in args.lengths.split(",")]:
        b = max(1, args.tokens // t)
        q, k, v = (rng.standard_normal((b, t, D)).astype(dtype) for _ in range(3))
        segments = _segments(b, t, rng)
        bias = _segment_bias(segments, t, dtype)
        for kind in ("bias", "no_bias"):
            feeds = {"q": q, "k": k, "v": v, **({"bias": bias} if kind == "bias" else {})}
            row, out = timed(kind, feeds)
            if not cuda and kind == "bias":
                row["max_abs_err"] = float(np.abs(out - _reference(q, k, v, bias)).max())
            report["cases"].append({"kind": kind, "T": t, "B": b, **row})
            print("%-8s T=%4d B=%3d: %s" % (kind, t, b, {k: v for k, v in row.items() if k != "kernels"}))
        if not cuda:
            continue  # PackedMultiHeadAttention has CUDA kernels only
        _packed_cases(timed, report, q, k, v, segments, t, dtype)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
