"""In-process GPU comparison for a Qwen3.5-backbone export, no HTTP: our ONNX Runtime graph
(each GDN kernel exported, CUDA graphs off and on) against HF transformers eager on the same GPU,
plus the fp16/bf16 parity gate against transformers in fp32.

    python -m benchmarks.gpu.qwen_bench --checkpoint CK --exports la=EX1,gdn=EX2 \
        --lengths 139,218,292 --out results.json

Timings are p50/p95 of `--iters` synchronized calls after `--warmup`, variants interleaved per
length; `--batch 1,16` times each length at each batch size (rows of equal length). A length is
the whole prompt's: an export with a baked prompt head (models/qwen35/prefix.py) runs the tokens
after it, transformers the head and those tokens, as a served request does. The parity gate is
models.precision's, here over the 26 letter logits of each prompt.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time


def baked_head(directory: str) -> list[int]:
    """The prompt head an export has baked into its graph (empty: none), which every row starts with."""
    from models import manifest

    return list((manifest.read(directory).get("prefix") or {}).get("ids") or [])


def _stats(samples):
    s = sorted(samples)
    return {
        "p50_ms": round(statistics.median(s) * 1e3, 3),
        "p95_ms": round(s[int(0.95 * (len(s) - 1))] * 1e3, 3),
        "mean_ms": round(statistics.fmean(s) * 1e3, 3),
        "n": len(s),
    }


def hf_model(checkpoint: str, dtype, adapter: str | None = None, device: str = "cuda"):
    """transformers' Qwen3_5ForCausalLM (eager attention) with the checkpoint's text weights, and
    the LoRA adapter the export merged, if any (else parity compares different weights). The
    weights come through `weights.load_text_state`, so a described random checkpoint serves too.
    The module is built in `dtype`, as `from_pretrained(dtype=...)` builds it: the rotary
    frequencies stay float32, and a 27B never exists in float32 (108 GB) on the GPU."""
    import torch
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    from models.qwen35 import weights

    with open(checkpoint + "/config.json") as f:
        cfg = json.load(f)
    text = dict(cfg.get("text_config", cfg))
    text.pop("model_type", None)
    config = Qwen3_5TextConfig(**text)
    config._attn_implementation = "eager"
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = Qwen3_5ForCausalLM(config)
    finally:
        torch.set_default_dtype(default)
    state = weights.load_text_state(checkpoint, dtype)
    if adapter:
        weights.merge_lora(state, adapter)
    lm_head = state.pop("lm_head.weight", None)
    model.model.load_state_dict(state, strict=True)
    if lm_head is not None:
        model.lm_head.weight.data.copy_(lm_head)
    else:
        model.lm_head.weight = model.model.embed_tokens.weight
    return model.eval()


def _replayed(runner, feeds):
    """A run of `feeds`; a GraphRunner first captures their shape (as the executor does between
    passes), so its calls time the replay."""
    if hasattr(runner, "capture") and runner.shape_key(feeds) not in runner.graphs:
        runner.capture(feeds)
    return runner.run(None, feeds)


def _runners(exports: dict, plans: list[str], graphs: bool) -> tuple[dict, dict]:
    """({label: session}, {label: baked head ids}) for each export and GatedDeltaNet plan, each
    with a CUDA-graph twin (`label+graphs`) where asked and the provider takes it."""
    from app.runtime import sessions

    runners, heads = {}, {}
    for base, directory, plan in [(b, d, p) for b, d in exports.items() for p in plans]:
        label = base if len(plans) == 1 else "%s@%s" % (base, plan)
        t0 = time.perf_counter()
        runners[label] = sessions.create(directory + "/model.onnx", "cuda", gdn_plan=plan).session
        heads[label] = heads[label + "+graphs"] = baked_head(directory)
        if graphs:
            try:
                runners[label + "+graphs"] = sessions.create(
                    directory + "/model.onnx", "cuda", cuda_graphs=64, gdn_plan=plan
                ).session
            except Exception as exc:  # e.g. nodes left on the CPU provider: no graph capture
                print("%s: no CUDA graphs: %s" % (label, str(exc)[:300]), flush=True)
        print("%s: sessions created in %.1f s" % (label, time.perf_counter() - t0), flush=True)
    return runners, heads


def _timed(calls: dict, key: str, shape: str, warmup: int, iters: int, results: dict) -> dict:
    """Each call's stats at this shape, the calls interleaved after `warmup` rounds. The first
    call of each (plans, captures, autotuning) goes to results["first_call_ms"][key]; a variant
    that cannot run the shape goes to results["errors"], not fatal."""
    for k, f in list(calls.items()):
        try:
            t0 = time.perf_counter()
            f()
            results.setdefault("first_call_ms", {}).setdefault(key, {})[k] = round((time.perf_counter() - t0) * 1e3, 2)
        except Exception as exc:
            results.setdefault("errors", {})["%s@%s" % (k, shape)] = repr(exc)[:400]
            print("skipping %s at %s: %r" % (k, shape, exc), flush=True)
            del calls[k]
    times: dict = {k: [] for k in calls}
    for _ in range(warmup):
        for f in calls.values():
            f()
    for _ in range(iters):
        for k, f in calls.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return {k: _stats(v) for k, v in times.items()}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--exports", required=True, help="label=dir,label=dir")
    ap.add_argument("--adapter", help="the PEFT LoRA folder the exports merged (Open-Jev's package adapter)")
    ap.add_argument("--lengths", default="139,218,292")
    ap.add_argument("--batch", default="1", help="batch sizes, comma separated")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--no-hf", action="store_true")
    ap.add_argument("--no-graphs", action="store_true", help="plain sessions only")
    ap.add_argument(
        "--gdn-plans",
        default="auto",
        help="ORT_GDN_PLAN values, comma separated (auto, chunked, chunked_split, recurrent): one set "
        "of sessions each; the GatedDeltaNet kernel reads it when a session is created",
    )
    ap.add_argument("--parity-prompts", type=int, default=16)
    ap.add_argument("--profile", help="label of an export to profile per op type (batch 1 and 16, 218 tokens)")
    ap.add_argument("--profile-plan", default="auto", help="the ORT_GDN_PLAN of the profiled sessions")
    ap.add_argument("--out")
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    from app.runtime import sessions
    from models import gdn_plan, manifest
    from models.qwen35 import gate

    exports = dict(kv.split("=", 1) for kv in args.exports.split(","))
    lengths = [int(x) for x in args.lengths.split(",")]
    rng = np.random.default_rng(0)
    runners, heads = _runners(exports, args.gdn_plans.split(","), not args.no_graphs)
    # Graphs that take a prompt head per pass (Open-Jev): each batch's rows continue the first
    # row's first half (gate.feeds), as a request's candidates continue its state.
    shared = {}
    for label in runners:  # labels: the export's, then @plan and +graphs
        shared[label] = gdn_plan.shared_head(manifest.read(exports[label.split("@")[0].split("+")[0]]))
    hf = None
    if not args.no_hf:
        try:
            hf = hf_model(args.checkpoint, torch.bfloat16, args.adapter)
        except Exception as exc:  # an older transformers without qwen3_5: say so, go on
            print("HF baseline unavailable: %r" % exc, flush=True)
    results = {"lengths": {}, "gpu": torch.cuda.get_device_name(0)}
    for n, batch in [(n, int(b)) for n in lengths for b in args.batch.split(",")]:
        ids = rng.integers(0, 1000, size=(batch, n), dtype=np.int64)

        def after_head(label, ids=ids):  # the feeds of the tokens after this export's baked head
            return gate.feeds(ids[:, len(heads[label]) :], shared[label])

        calls = {label: functools.partial(_replayed, r, after_head(label)) for label, r in runners.items()}
        if hf is not None:
            # The same prompts, each starting with the baked head where an export has one.
            head = next((h for h in heads.values() if h), [])
            tids = torch.from_numpy(
                np.concatenate([np.tile(np.array(head, dtype=np.int64), (batch, 1)), ids[:, len(head) :]], axis=1)
            ).cuda()

            def hf_call(tids=tids):
                with torch.no_grad():
                    out = hf(input_ids=tids, use_cache=False, logits_to_keep=1).logits
                torch.cuda.synchronize()
                return out

            calls["hf-eager-bf16"] = hf_call
        key = "%d" % n if batch == 1 else "%dx%d" % (batch, n)
        results["lengths"][key] = _timed(calls, key, "%dx%d" % (batch, n), args.warmup, args.iters, results)
        print(
            key,
            json.dumps(results["lengths"][key]),
            "first call",
            json.dumps(results["first_call_ms"][key]),
            flush=True,
        )
    hf = None
    torch.cuda.empty_cache()
    if args.parity_prompts:
        try:
            results["parity"] = parity(args.checkpoint, runners, args.parity_prompts, rng, args.adapter, heads, shared)
        except Exception as exc:
            results["parity"] = {"error": repr(exc)}
        print("parity", json.dumps(results["parity"]), flush=True)
    if args.profile:
        try:
            with sessions.gdn_engine(args.profile_plan):  # profile() builds its own sessions
                results["profile"] = profile(exports[args.profile] + "/model.onnx")
        except Exception as exc:
            results["profile"] = {"error": repr(exc)[:400]}
        print("profile", json.dumps(results["profile"]), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


def profile(path: str, length: int = 218) -> dict:
    """ONNX Runtime's own per-node timings (host side), summed by op type, and the GPU's kernel
    times (gpu_kernel_times), for batch 1 and 16."""
    import collections

    import numpy as np
    import onnxruntime as ort

    from benchmarks.gpu.cupti import gpu_kernel_times

    out = {}
    for batch in (1, 16):
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.log_severity_level = 3
        session = ort.InferenceSession(path, options, providers=["CUDAExecutionProvider"])
        feeds = {
            "input_ids": np.random.default_rng(1).integers(0, 1000, (batch, length), dtype=np.int64),
            "positions": np.full((batch,), length - 1, dtype=np.int64),
        }
        for _ in range(3):
            session.run(None, feeds)
        trace = session.end_profiling()
        with open(trace) as f:
            events = json.load(f)
        runs = [e for e in events if e.get("name") == "model_run"]
        by_op, by_node, shapes = collections.Counter(), collections.Counter(), {}
        for e in events:
            if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
                by_op[e["args"].get("op_name", "?")] += e["dur"]
                node = e["name"][: -len("_kernel_time")]
                by_node[node] += e["dur"]
                shapes[node] = [e["args"].get("op_name"), e["args"].get("output_type_shape")]
        plain = ort.InferenceSession(path, providers=["CUDAExecutionProvider"])
        try:
            gpu = gpu_kernel_times(lambda plain=plain, feeds=feeds: plain.run(None, feeds))
        except Exception as exc:  # no CUPTI here: the host-side table still stands
            gpu = {"error": repr(exc)[:300]}
        # The last run only: the first ones include allocation and autotuning.
        last = runs[-1]["dur"] / 1e3 if runs else None
        total = sum(by_op.values()) / 3 / 1e3
        out["batch%d" % batch] = {
            "model_run_ms": last,
            "host_kernel_ms_per_run": round(total, 3),
            "top": [(op, round(us / 3 / 1e3, 3)) for op, us in by_op.most_common(16)],
            "nodes": len(by_node),
            "top_nodes": [(n, round(us / 3 / 1e3, 3), *shapes[n]) for n, us in by_node.most_common(25)],
            "gpu": gpu,
        }
    return out


def parity(
    checkpoint: str,
    runners: dict,
    prompts: int,
    rng,
    adapter: str | None = None,
    heads: dict | None = None,
    shared: dict | None = None,
) -> dict:
    """Reduced-precision exports against transformers fp32 on the letter logits (A-Z rows), each
    prompt run whole by transformers and after its baked head (`heads`, by label) by the export."""
    import numpy as np
    import torch

    from models import precision
    from models.qwen35 import gate

    torch.set_grad_enabled(False)
    ref = hf_model(checkpoint, torch.float32, adapter)
    rows = ref.lm_head.weight[32:58].float().detach()
    out = {}
    heads = heads or {}
    cases = [rng.integers(0, 1000, size=(1, int(n)), dtype=np.int64) for n in rng.integers(80, 400, size=prompts)]
    wants: dict[tuple, list] = {}

    def want(head: tuple) -> list:
        if head not in wants:
            wants[head] = []
            with torch.no_grad():
                for ids in cases:
                    whole = np.concatenate([np.array([head], dtype=np.int64).reshape(1, -1), ids], axis=1)
                    h = ref.model(input_ids=torch.from_numpy(whole).cuda()).last_hidden_state[0, -1].float()
                    wants[head].append(torch.softmax(h @ rows.T, -1).double().cpu().numpy())
        return wants[head]

    for label, runner in runners.items():
        if label.endswith("+graphs"):
            continue
        expected = want(tuple(heads.get(label, ())))
        probs = []
        for ids in cases:
            hidden = runner.run(None, gate.feeds(ids, (shared or {}).get(label, False)))[0]
            logits = torch.from_numpy(hidden.astype(np.float32)).cuda() @ rows.T
            probs.append(torch.softmax(logits, -1).double().cpu().numpy()[0])
        out[label] = precision.gate_rows(probs, expected)
    return out


if __name__ == "__main__":
    main()
