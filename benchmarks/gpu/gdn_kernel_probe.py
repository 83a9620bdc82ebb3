"""One GatedDeltaNet layer's recurrence, ONNX Runtime's kernel against flash-linear-attention's
(FLA, Triton) on the same inputs, at a Qwen3.5 model's head counts (GPU machine).

Is a faster GDN kernel than ONNX Runtime's to be had? This answers it at our shapes before
anyone writes one (an ONNX Runtime custom op): both get the whole fused layer's work, as served
(`gated_delta_net_fused`): packed q|k|v from the conv, raw gate logits, q/k L2 norm, the gates
`-exp(A_log)·softplus(a + dt_bias)` and `sigmoid(b)`, a given initial state (the baked prompt
head's) and no final state. ONNX Runtime runs one `GatedDeltaNet` node exactly as
gdn.fused_translation emits it; FLA runs `chunk_gated_delta_rule` with its gate, beta and norm
in the kernel and the state V-major, as ours holds it.

    python -m benchmarks.gpu.gdn_kernel_probe [--model 4b] [--shapes 1x144,8x144,1x1088,1x3456] \
        [--plans chunked_split,auto] [--out F]

GPU time per layer from CUPTI (benchmarks/gpu/cupti.py: every kernel a call launches), and
FLA's per call when 8 calls are replayed as one CUDA graph (launch gaps included, as in a
captured pass). Outputs are compared with each other and, at the first shape, with
models.qwen35.gdn.recurrence in float32.
"""

from __future__ import annotations

import argparse
import json
import tempfile

import numpy as np

from models.qwen35 import random_checkpoint


def dims(model: str) -> dict:
    """Hk, Dk, Hv, Dv of a full-size Qwen3.5 model's GDN layers (random_checkpoint's configs)."""
    text = random_checkpoint.full_text_config(model)
    return {
        "hk": text["linear_num_key_heads"],
        "dk": text["linear_key_head_dim"],
        "hv": text["linear_num_value_heads"],
        "dv": text["linear_value_head_dim"],
    }


def parse_shapes(text: str) -> list[tuple[int, int]]:
    return [(int(r), int(t)) for r, t in (s.split("x") for s in text.split(","))]


def inputs(rows: int, tokens: int, d: dict, seed: int = 0) -> dict:
    """One layer's inputs as the served graph feeds them: qkv [B, T, 2·Hk·Dk + Hv·Dv] fp16 (after
    conv and silu), the raw gate logits a, b [B, T, Hv] fp32, A_log and dt_bias [Hv] fp32, and a
    V-major state [B, Hv, Dv, Dk] fp32."""
    rng = np.random.default_rng(seed)
    width = 2 * d["hk"] * d["dk"] + d["hv"] * d["dv"]
    return {
        "qkv": (rng.standard_normal((rows, tokens, width), dtype=np.float32) * 0.5).astype(np.float16),
        "a": rng.standard_normal((rows, tokens, d["hv"]), dtype=np.float32),
        "b": rng.standard_normal((rows, tokens, d["hv"]), dtype=np.float32),
        "a_log": rng.uniform(0.0, 1.5, d["hv"]).astype(np.float32),
        "dt_bias": rng.standard_normal(d["hv"], dtype=np.float32) * 0.5,
        "state": (rng.standard_normal((rows, d["hv"], d["dv"], d["dk"]), dtype=np.float32) * 0.05),
    }


def graph(d: dict) -> bytes:
    """A model of one GatedDeltaNet node in the packed form gdn.fused_translation emits; batch and
    tokens dynamic."""
    from onnx import TensorProto, helper

    width = 2 * d["hk"] * d["dk"] + d["hv"] * d["dv"]
    f32, f16 = TensorProto.FLOAT, TensorProto.FLOAT16
    ins = [
        helper.make_tensor_value_info("qkv", f16, ["B", "T", width]),
        helper.make_tensor_value_info("a", f32, ["B", "T", d["hv"]]),
        helper.make_tensor_value_info("b", f32, ["B", "T", d["hv"]]),
        helper.make_tensor_value_info("a_log", f32, [d["hv"]]),
        helper.make_tensor_value_info("dt_bias", f32, [d["hv"]]),
        helper.make_tensor_value_info("state", f32, ["B", d["hv"], d["dv"], d["dk"]]),
    ]
    out = helper.make_tensor_value_info("out", f16, ["B", "T", d["hv"], d["dv"]])
    consts = {"tokens": [-1, width], "per_head": [-1, d["hv"]], "out_tail": [d["hv"], d["dv"]]}
    nodes = [
        helper.make_node("Constant", [], [k], value=helper.make_tensor(k, TensorProto.INT64, [len(v)], v))
        for k, v in consts.items()
    ]
    nodes += [
        helper.make_node("Reshape", ["qkv", "tokens"], ["q2"]),
        helper.make_node("Reshape", ["a", "per_head"], ["a2"]),
        helper.make_node("Reshape", ["b", "per_head"], ["b2"]),
        helper.make_node(
            "GatedDeltaNet",
            ["q2", "", "", "", "a2", "b2", "state", "a_log", "dt_bias"],
            ["o2", "final"],
            domain="com.microsoft",
            qk_l2_norm=1,
            update_rule="gated_delta",
            gate_activation="qwen",
            beta_activation="sigmoid",
        ),
        helper.make_node("Shape", ["qkv"], ["qshape"], end=2),
        helper.make_node("Concat", ["qshape", "out_tail"], ["oshape"], axis=0),
        helper.make_node("Reshape", ["o2", "oshape"], ["out"]),
    ]
    g = helper.make_graph(nodes, "gdn_layer", ins, [out])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    return model.SerializeToString()


def reference(x: dict, d: dict):
    """models.qwen35.gdn's own maths (split, gates, token-by-token recurrence) in float32."""
    import torch

    from models.qwen35 import gdn

    t = {k: torch.from_numpy(v) for k, v in x.items()}
    q, k, v = gdn.split_qkv(t["qkv"].float(), d["hk"], d["dk"], d["hv"], d["dv"])
    g, beta = gdn.gates(t["a"], t["b"], t["a_log"], t["dt_bias"])
    return gdn.recurrence(q, k, v, g, beta, t["state"])[0].numpy()


def fla_call(x: dict, d: dict, dtype: str):
    """A no-argument callable running FLA's chunked kernel on `x` (moved to the GPU once), and
    its output's holder."""
    import torch
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    dev = torch.device("cuda")
    td = getattr(torch, dtype)
    qkv = torch.from_numpy(x["qkv"]).to(dev, td)
    q, k, v = torch.split(qkv, [d["hk"] * d["dk"], d["hk"] * d["dk"], d["hv"] * d["dv"]], dim=-1)
    b, t = qkv.shape[:2]
    q, k, v = (
        z.reshape(b, t, h, w).contiguous()
        for z, h, w in ((q, d["hk"], d["dk"]), (k, d["hk"], d["dk"]), (v, d["hv"], d["dv"]))
    )
    a, beta = (torch.from_numpy(x[n]).to(dev) for n in ("a", "b"))
    a_log, dt_bias, state = (torch.from_numpy(x[n]).to(dev) for n in ("a_log", "dt_bias", "state"))
    holder = {}

    def run():
        with torch.no_grad():
            holder["out"] = chunk_gated_delta_rule(
                q,
                k,
                v,
                a,
                beta,
                initial_state=state,
                output_final_state=False,
                use_qk_l2norm_in_kernel=True,
                use_gate_in_kernel=True,
                A_log=a_log,
                dt_bias=dt_bias,
                use_beta_sigmoid_in_kernel=True,
                state_v_first=True,
            )[0]

    return run, holder


def kernel_us(run, iters: int) -> dict:
    """GPU time and kernel launches a call, from CUPTI, less the host<->device copies (ONNX
    Runtime's numpy feeds and fetches; FLA's inputs are on the GPU already)."""
    from benchmarks.gpu.cupti import gpu_kernel_times

    k = gpu_kernel_times(run, iters=iters, top=200)
    kept = [t for t in k["top"] if not t[0].startswith(("Memcpy", "Memset"))]
    return {"gpu_us": round(sum(t[1] for t in kept) * 1e3, 1), "kernels": sum(t[2] for t in kept), "top": kept[:6]}


def graph_replay_us(run, copies: int = 8, iters: int = 20) -> float:
    """Per call, `copies` calls captured in one CUDA graph and replayed (median of `iters`)."""
    import torch

    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            run()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        for _ in range(copies):
            run()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        g.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / copies)
    return float(np.median(times))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="4b", choices=random_checkpoint.FULL_SIZES)
    ap.add_argument("--shapes", default="1x144,8x144,16x218,1x1088,1x3456")
    ap.add_argument("--plans", default="chunked_split,auto", help="ONNX Runtime GDN engines (app.config)")
    ap.add_argument("--fla-dtypes", default="float16,bfloat16")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--out")
    args = ap.parse_args(argv)

    import onnxruntime as ort

    from app.runtime import sessions

    ort.preload_dlls()
    d = dims(args.model)
    path = tempfile.mkdtemp() + "/gdn.onnx"
    with open(path, "wb") as f:
        f.write(graph(d))
    runners = {plan: sessions.create(path, "cuda", gdn_plan=plan).session for plan in args.plans.split(",")}
    rows = []
    for i, (b, t) in enumerate(parse_shapes(args.shapes)):
        x = inputs(b, t, d, seed=i)
        row = {"rows": b, "tokens": t, **d, "ort": {}, "fla": {}}
        outs = {}
        for plan, s in runners.items():
            outs["ort:" + plan] = s.run(None, x)[0].astype(np.float32)
            row["ort"][plan] = kernel_us(lambda s=s, x=x: s.run(None, x), args.iters)
        for dtype in args.fla_dtypes.split(","):
            try:
                run, held = fla_call(x, d, dtype)
                run()
                outs["fla:" + dtype] = held["out"].float().cpu().numpy()
                row["fla"][dtype] = dict(kernel_us(run, args.iters), graph_us=round(graph_replay_us(run), 1))
            except Exception as exc:  # no FLA on the path, or a shape it refuses: said, not fatal
                row["fla"][dtype] = {"error": repr(exc)[:300]}
        base = next(iter(outs.values()))
        row["max_abs_diff"] = {k: float(np.abs(v - base).max()) for k, v in outs.items()}
        if i == 0:
            ref = reference(x, d)
            row["max_abs_diff_reference"] = {k: float(np.abs(v - ref).max()) for k, v in outs.items()}
        rows.append(row)
        print(
            "%dx%d  ORT %s  FLA %s  diff %s"
            % (
                b,
                t,
                {p: (r["gpu_us"], r["kernels"]) for p, r in row["ort"].items()},
                {
                    p: (r.get("gpu_us"), r.get("graph_us"), r.get("kernels")) if "error" not in r else r["error"][:80]
                    for p, r in row["fla"].items()
                },
                {k: "%.1e" % v for k, v in row.get("max_abs_diff_reference", row["max_abs_diff"]).items()},
            ),
            flush=True,
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
