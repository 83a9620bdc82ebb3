"""The kernels of one Laya encoder layer besides its matrix products, each beside the other
forms ONNX Runtime offers for it, by the shape of a pass (GPU machine).

    python -m benchmarks.gpu.layer_ops_probe [--shapes 2x256,12x464,41x512] [--out F]
    python -m benchmarks.gpu.layer_ops_probe --device cpu --shapes 1x64   # a dry run here

`pass_probe`'s kernel kinds say where a packed pass's time goes (rotary, GELU and the GLU
product, the split of q, k and v); this says what the alternatives would cost, each a
one-node (or two-node) graph on CUDA-resident inputs in fp16 with ModernBERT-large's sizes,
timed by CUPTI (benchmarks/gpu/cupti.py):

* `gelu` (com.microsoft Gelu, as exported), `gelu_onnx` (ai.onnx Gelu-20), `bias_gelu`
  (com.microsoft BiasGelu with a zero bias), each on [N, 2624]; `gelu_mul`, GELU then the GLU
  product, as the layer runs them; `bias_split_gelu` (com.microsoft BiasSplitGelu: both halves of
  one [1, N, 5248] product in one kernel; CUDA only);
* `rotary_qkv` (com.microsoft RotaryEmbedding over q, k and v, four heads a 768-element block,
  as exported), `rotary_qk` (q and k alone: 512-element blocks, all rotated), `rotary_qk_onnx`
  (ai.onnx RotaryEmbedding-23, the same), `rotary_q_heads` (16 heads of 64, one tensor);
* `split_qkv`, `split_qk`: the Split that cuts the rotated blocks into q, k (and v);
* `matmul_qkv`, `matmul_qk`, `matmul_v`: the projections as one, two or three products.

Every case's output is checked against numpy (GELU with erf; rotary in adjacent pairs at each
token's position); a form this build does not take is recorded with its error. `--device cpu`
runs the same graphs in float32 on the CPU kernels.
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

from benchmarks.gpu.bound_graph import bound, runtime

D, INNER, HEADS, HEAD_DIM, GROUP, POSITIONS = 1024, 2624, 16, 64, 4, 512
CHECKED = 64  # tokens whose output is checked against numpy (the first ones of each pass)


def _graph(nodes, inputs, outputs, elem, opset: int = 17) -> bytes:
    from onnx import helper

    model = helper.make_model(
        helper.make_graph(nodes, "probe", inputs, [helper.make_tensor_value_info(o, elem, None) for o in outputs]),
        opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)],
    )
    model.ir_version = 10 if opset >= 23 else 9
    return model.SerializeToString()


def _gelu(x: np.ndarray) -> np.ndarray:
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def _rotary(x: np.ndarray, pos: np.ndarray, cos: np.ndarray, sin: np.ndarray, heads: int, rotated: int) -> np.ndarray:
    """x [1, N, W] as `heads` blocks whose first `rotated` elements turn in adjacent pairs."""
    n, w = x.shape[1], x.shape[2]
    blocks = x.reshape(n, heads, w // heads).astype(np.float64)
    pairs = blocks[..., :rotated].reshape(n, heads, rotated // 2, 2)
    c, s = cos[pos[0]][:, None, :], sin[pos[0]][:, None, :]
    a, b = pairs[..., 0], pairs[..., 1]
    turned = np.stack([a * c - b * s, b * c + a * s], -1).reshape(n, heads, rotated)
    return np.concatenate([turned, blocks[..., rotated:]], -1).reshape(1, n, w)


def cases(b: int, t: int, dtype, rng) -> list[tuple[str, bytes, dict, list[str], object]]:
    """(name, graph, feeds, outputs, reference) for a pass of `n` batch tokens; the reference is
    numpy's result for the first CHECKED tokens. Rotary and split take the pass as [B, T, W]
    (RotaryEmbedding's cache covers positions below T), the rest as [B·T, W]."""
    n = b * t
    from onnx import TensorProto, helper

    elem = TensorProto.FLOAT16 if dtype == np.float16 else TensorProto.FLOAT
    vi = lambda name, shape, t=elem: helper.make_tensor_value_info(name, t, shape)  # noqa: E731
    node = helper.make_node
    draw = lambda *shape: rng.standard_normal(shape).astype(dtype)  # noqa: E731
    x, y = draw(n, INNER), draw(n, INNER)
    zeros = np.zeros(INNER, dtype)
    k = CHECKED
    gelu_x = _gelu(x[:k].astype(np.float64))
    out = [
        (
            "gelu",
            _graph([node("Gelu", ["x"], ["o"], domain="com.microsoft")], [vi("x", [n, INNER])], ["o"], elem),
            {"x": x},
            ["o"],
            gelu_x,
        ),
        (
            "gelu_onnx",
            _graph([node("Gelu", ["x"], ["o"])], [vi("x", [n, INNER])], ["o"], elem, opset=20),
            {"x": x},
            ["o"],
            gelu_x,
        ),
        (
            "bias_gelu",
            _graph(
                [node("BiasGelu", ["x", "b"], ["o"], domain="com.microsoft")],
                [vi("x", [n, INNER]), vi("b", [INNER])],
                ["o"],
                elem,
            ),
            {"x": x, "b": zeros},
            ["o"],
            gelu_x,
        ),
        (
            "gelu_mul",
            _graph(
                [node("Gelu", ["x"], ["g"], domain="com.microsoft"), node("Mul", ["g", "y"], ["o"])],
                [vi("x", [n, INNER]), vi("y", [n, INNER])],
                ["o"],
                elem,
            ),
            {"x": x, "y": y},
            ["o"],
            gelu_x * y[:k],
        ),
        # BiasSplitGelu: left half times the GELU of the right half
        (
            "bias_split_gelu",
            _graph(
                [node("BiasSplitGelu", ["x", "b"], ["o"], domain="com.microsoft")],
                [vi("x", [1, n, 2 * INNER]), vi("b", [2 * INNER])],
                ["o"],
                elem,
            ),
            {"x": np.concatenate([y, x], 1)[None], "b": np.zeros(2 * INNER, dtype)},
            ["o"],
            (gelu_x * y[:k])[None],
        ),
    ]
    pos = rng.integers(0, t, (b, t)).astype(np.int64)
    for name, width, heads, rotated in (
        ("rotary_qkv", 3 * D, HEADS // GROUP, 2 * GROUP * HEAD_DIM),
        ("rotary_qk", 2 * D, HEADS // GROUP, 2 * GROUP * HEAD_DIM),
        ("rotary_q_heads", D, HEADS, HEAD_DIM),
    ):
        angles = rng.uniform(0, 2 * np.pi, (POSITIONS, rotated // 2))
        cos, sin = np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)
        z = draw(b, t, width)
        ref = _rotary(z[:1, :k], pos[:1, :k], cos.astype(np.float64), sin.astype(np.float64), heads, rotated)
        shapes = [
            vi("x", [b, t, width]),
            vi("p", [b, t], TensorProto.INT64),
            vi("c", list(cos.shape)),
            vi("s", list(sin.shape)),
        ]
        attrs = {"interleaved": 1, "num_heads": heads, "rotary_embedding_dim": rotated}
        feeds = {"x": z, "p": pos, "c": cos, "s": sin}
        out.append(
            (
                name,
                _graph(
                    [node("RotaryEmbedding", ["x", "p", "c", "s"], ["o"], domain="com.microsoft", **attrs)],
                    shapes,
                    ["o"],
                    elem,
                ),
                feeds,
                ["o"],
                ref,
            )
        )
        if name == "rotary_qk":
            out.append(
                (
                    name + "_onnx",
                    _graph(
                        [node("RotaryEmbedding", ["x", "c", "s", "p"], ["o"], **attrs)], shapes, ["o"], elem, opset=23
                    ),
                    feeds,
                    ["o"],
                    ref,
                )
            )
    for name, parts in (("split_qkv", 3), ("split_qk", 2)):
        width = parts * D
        z = draw(b, t, width)
        names = ["o%d" % i for i in range(parts)]
        graph = _graph(
            [node("Reshape", ["x", "shape"], ["r"]), node("Split", ["r"], names, axis=3)],
            [vi("x", [b, t, width]), vi("shape", [4], TensorProto.INT64)],
            names,
            elem,
        )
        ref = z.reshape(b, t, GROUP, width // GROUP)[:1, :k, :, : width // GROUP // parts]
        out.append((name, graph, {"x": z, "shape": np.array([b, t, GROUP, width // GROUP], np.int64)}, names, ref))
    h = draw(n, D)
    for name, width in (("matmul_qkv", 3 * D), ("matmul_qk", 2 * D), ("matmul_v", D)):
        w = (draw(D, width) / np.sqrt(D)).astype(dtype)
        out.append(
            (
                name,
                _graph([node("MatMul", ["x", "w"], ["o"])], [vi("x", [n, D]), vi("w", [D, width])], ["o"], elem),
                {"x": h, "w": w},
                ["o"],
                h[:k].astype(np.float64) @ w.astype(np.float64),
            )
        )
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="2x256,12x464,41x512", help="BxT: a 1-, 16- and 64-row traffic pass")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    cuda, dtype = runtime(args.device)
    rng = np.random.default_rng(0)
    report = {"dtype": np.dtype(dtype).name, "device": args.device, "cases": []}
    for shape in args.shapes.split(","):
        b, t = (int(v) for v in shape.split("x"))
        for name, graph, feeds, outputs, ref in cases(b, t, dtype, rng):
            row: dict = {"case": name, "shape": [b, t], "tokens": b * t}
            try:
                run, binding = bound(graph, feeds, outputs, cuda)
                got = binding.copy_outputs_to_cpu()[0]
                got = (got[:CHECKED] if got.ndim == 2 else got[:1, :CHECKED]).astype(np.float64)
                row["max_abs_err"] = float(np.abs(got - ref).max())
                if cuda:
                    from benchmarks.gpu.cupti import gpu_kernel_times

                    k = gpu_kernel_times(run, iters=args.iters, top=3)
                    row.update(gpu_ms=k["gpu_busy_ms"], kernels=[(t[0][:90], t[1]) for t in k["top"]])
            except Exception as exc:  # a form this onnxruntime build does not take
                row["error"] = str(exc)[:300]
            report["cases"].append(row)
            print({k: v for k, v in row.items() if k != "kernels"}, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
