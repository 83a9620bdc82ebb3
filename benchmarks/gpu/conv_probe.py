"""The GatedDeltaNet layers' causal conv alone: ONNX Runtime's CausalConvWithState on channels-last
data, as exported (gdn.conv_translation), against the same op on channels-first data between two
transposes, at a few (rows, tokens) shapes (GPU machine). On the H200 the kernel took as long
either way, so the transposes only added time below ~3,000 tokens (docs/benchmarks.md,
2026-12-02 graphs session).

    python -m benchmarks.gpu.conv_probe [--shapes 1x144,8x144,16x218,1x2944] [--channels 8192] [--out F]
    python -m benchmarks.gpu.conv_probe --device cpu --shapes 2x9 --channels 16      # a dry run here

Each form's graph holds `--copies` independent convs (a layer's each), with the baked head's
state as a past-state input. GPU time per conv from CUPTI (benchmarks/gpu/cupti.py); on the CPU,
host time. Both forms' outputs are compared first.
"""
from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

K = 4


def weights(channels: int, copies: int, seed: int = 0) -> list[np.ndarray]:
    """Each conv's depthwise weight [C, 1, K], fp16."""
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((channels, 1, K), dtype=np.float32) * 0.5).astype(np.float16) for _ in range(copies)]


def reference(x: np.ndarray, state: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """silu(causal depthwise conv) over x [B, T, C] after the K-1 inputs `state` [B, K-1, C], in float64."""
    padded = np.concatenate([state, x], 1).astype(np.float64)
    w = weight[:, 0, :].astype(np.float64)                              # [C, K]
    y = sum(padded[:, k:k + x.shape[1]] * w[:, k] for k in range(K))
    return y / (1.0 + np.exp(-y))


def graph(rows: int, tokens: int, channels: int, copies: int, form: str, seed: int = 0) -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    last = form == "channels_last"
    nodes, inits, outs = [], [], []
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, [rows, tokens, channels])
    state_shape = [rows, K - 1, channels] if last else [rows, channels, K - 1]
    state = helper.make_tensor_value_info("state", TensorProto.FLOAT16, state_shape)
    for i, w in enumerate(weights(channels, copies, seed)):
        inits.append(numpy_helper.from_array(w, "w%d" % i))
        if not last:                # each layer transposes its own input
            nodes.append(helper.make_node("Transpose", ["x"], ["xt%d" % i], perm=[0, 2, 1]))
        nodes.append(helper.make_node("CausalConvWithState", ["x" if last else "xt%d" % i, "w%d" % i, "", "state"],
                                      ["y%d" % i if last else "yt%d" % i, "s%d" % i], domain="com.microsoft",
                                      activation="silu", channels_last=int(last), ndim=1))
        if not last:
            nodes.append(helper.make_node("Transpose", ["yt%d" % i], ["y%d" % i], perm=[0, 2, 1]))
        outs.append(helper.make_tensor_value_info("y%d" % i, TensorProto.FLOAT16, [rows, tokens, channels]))
    model = helper.make_model(helper.make_graph(nodes, "conv", [x, state], outs, inits),
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model.SerializeToString()


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1x144,8x144,16x218,1x2944")
    ap.add_argument("--channels", type=int, default=8192)
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    import onnxruntime as ort

    providers = ["CUDAExecutionProvider"] if args.device == "cuda" else ["CPUExecutionProvider"]
    results = []
    for shape in args.shapes.split(","):
        rows, tokens = (int(v) for v in shape.split("x"))
        rng = np.random.default_rng(1)
        x = rng.standard_normal((rows, tokens, args.channels)).astype(np.float16)
        state = rng.standard_normal((rows, K - 1, args.channels)).astype(np.float16)
        row = {"rows": rows, "tokens": tokens, "channels": args.channels}
        outputs = {}
        for form in ("channels_last", "channels_first"):
            sess = ort.InferenceSession(graph(rows, tokens, args.channels, args.copies, form), providers=providers)
            feeds = {"x": x, "state": state if form == "channels_last" else np.ascontiguousarray(state.transpose(0, 2, 1))}
            outputs[form] = sess.run(["y0"], feeds)[0].astype(np.float32)
            if args.device == "cuda":
                from benchmarks.gpu.cupti import gpu_kernel_times

                binding = sess.io_binding()
                for name, value in feeds.items():
                    binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(value, "cuda", 0))
                for o in sess.get_outputs():
                    binding.bind_output(o.name, "cuda", 0)
                t = gpu_kernel_times(lambda: sess.run_with_iobinding(binding), iters=args.iters, top=6)
                row[form] = {"us_per_conv": round(t["gpu_busy_ms"] * 1e3 / args.copies, 2),
                             "kernels_per_conv": t["kernels_per_call"] / args.copies, "top": t["top"]}
            else:
                t0 = time.perf_counter()
                for _ in range(args.iters):
                    sess.run(None, feeds)
                row[form] = {"us_per_conv": round((time.perf_counter() - t0) * 1e6 / args.iters / args.copies, 2)}
        row["max_abs_diff"] = float(np.abs(outputs["channels_last"] - outputs["channels_first"]).max())
        want = reference(x, state, weights(args.channels, 1)[0])
        row["max_abs_diff_reference"] = float(np.abs(outputs["channels_last"] - want).max())
        results.append(row)
        print("%2d x %4d tokens x %d channels: channels-last %.1f us a conv, channels-first with transposes %.1f us; "
              "max |diff| %.2e" % (rows, tokens, args.channels, row["channels_last"]["us_per_conv"],
                                   row["channels_first"]["us_per_conv"], row["max_abs_diff"]), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
