"""Where reduced-precision answers drift from fp32, layer by layer, on one checkpoint.

It tells an ONNX graph that computes something wrong from a random deep stack that amplifies any
rounding at all (random full-size stacks fail the fp16 parity gate where a tiny checkpoint
passes; benchmarks/HISTORY.md). It runs our torch module (the reference
maths; `--adapter` merges the LoRA the export merged) in fp32 without TF32 as the reference, then

* the same module in fp32 with TF32 matmuls, in fp16 and in bf16 (what transformers would do);
* the fp32 module with its embeddings perturbed by 1e-3 relative noise (a chaos probe: how much
  the stack amplifies a perturbation of known size);
* each ONNX export given (`--exports label=dir`), on ONNX Runtime (CUDA when available).

For each: the relative error of the last token's hidden state after every layer (torch
variants), and at the end the parity gate's measures (models.precision) on the letter rows (A-Z).

    python -m benchmarks.gpu.drift --checkpoint CK --exports gdn=EX --prompts 8 --out drift.json
"""

from __future__ import annotations

import argparse
import copy
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

LETTERS = slice(32, 58)


def _rel(a, b) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def letter_rows(state: dict) -> torch.Tensor:
    rows = state["lm_head.weight"] if "lm_head.weight" in state else state["embed_tokens.weight"]
    return rows[LETTERS].float()


def run_layers(module, ids, perturb: float = 0.0, seed: int = 0):
    """Last-token hidden state after every layer (Layer.forward, the reference maths), then the
    final norm's output (float32)."""
    import torch

    with torch.no_grad():
        x = module.embed_tokens(ids)
        if perturb:
            g = torch.Generator(device=ids.device).manual_seed(seed)
            x = x + perturb * x.abs().mean() * torch.randn(x.shape, generator=g, device=x.device, dtype=x.dtype)
        cos, sin = module.rope(ids.shape[1], ids.device, x.dtype)
        seen = []
        for layer in module.layers:
            x = layer(x, cos, sin)
            seen.append(x[0, -1].float())
        final = module.norm(x)[0, -1].float()
    return seen, final


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--exports", default="", help="label=dir,label=dir (ONNX exports of this checkpoint)")
    ap.add_argument(
        "--adapter",
        help="PEFT LoRA folder the exports merged (Open-Jev, Cua-S1): merged into the "
        "reference too, or the comparison is between different weights",
    )
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--min-tokens", type=int, default=80)
    ap.add_argument("--max-tokens", type=int, default=400)
    ap.add_argument("--skip", default="", help="torch variants to leave out: tf32,fp16,bf16,perturbed")
    ap.add_argument("--out")
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    from models import precision
    from models.qwen35 import export, weights
    from models.qwen35.dims import TextDims

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dims = TextDims.from_dir(args.checkpoint)
    state = weights.load_text_state(args.checkpoint, torch.float32)
    if args.adapter:
        print("merged %d LoRA weights" % len(weights.merge_lora(state, args.adapter)), flush=True)
    rows = letter_rows(state).to(device)
    ref = export.build_module(dims, state, "last", "float32", attention="sdpa").to(device)
    del state
    rng = np.random.default_rng(0)
    lengths = rng.integers(args.min_tokens, args.max_tokens, size=args.prompts)
    prompts = [
        torch.from_numpy(rng.integers(0, min(dims.vocab_size, 240000), size=(1, int(n)))).to(device) for n in lengths
    ]
    reference = [run_layers(ref, ids) for ids in prompts]
    probs_ref = [torch.softmax((final @ rows.T).double(), -1) for _, final in reference]
    skip = set(filter(None, args.skip.split(",")))
    results = {
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "layers": len(dims.layer_types),
        "hidden": dims.hidden_size,
        "prompt_tokens": lengths.tolist(),
        "reference": "our torch module, fp32, no TF32",
        "variants": {},
    }

    def record(label, finals, per_layer=None):
        probs = [torch.softmax((f.to(device).float() @ rows.T).double(), -1).cpu().numpy() for f in finals]
        parity = precision.gate_rows(probs, [p.cpu().numpy() for p in probs_ref])
        entry = {
            "final_rel_err": max(_rel(f.to(device).float(), r[1]) for f, r in zip(finals, reference)),
            "max_prob_drift": parity["max_prob_drift"],
            "top_identical": parity["top_choice_identical"],
            "passes": parity["passes"],
        }
        if per_layer is not None:
            entry["per_layer_rel_err"] = [round(x, 6) for x in per_layer]
        results["variants"][label] = entry
        print(
            label,
            json.dumps({k: v for k, v in entry.items() if k != "per_layer_rel_err"}),
            ("layers 1/8/16/last: %s" % [round(per_layer[i], 5) for i in (0, 7, 15, -1) if i < len(per_layer)])
            if per_layer
            else "",
            flush=True,
        )

    def torch_variant(label, module, **kw):
        outs = [run_layers(module, ids, **kw) for ids in prompts]
        per_layer = [max(_rel(o[0][i], r[0][i]) for o, r in zip(outs, reference)) for i in range(len(ref.layers))]
        record(label, [o[1] for o in outs], per_layer)

    if "tf32" not in skip and device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch_variant("torch-fp32-tf32", ref)
        torch.backends.cuda.matmul.allow_tf32 = False
    if "perturbed" not in skip:
        torch_variant("torch-fp32-perturbed-1e-3", ref, perturb=1e-3)
    for dtype in ("float16", "bfloat16"):
        if dtype[:4].replace("floa", "fp16").replace("bflo", "bf16") in skip:
            continue
        half = copy.deepcopy(ref).to(getattr(torch, dtype))
        # the RoPE frequencies stay fp32, as in the exported graph
        half.inv_freq = ref.inv_freq.clone()
        torch_variant("torch-" + dtype, half)
        del half
    for spec in filter(None, args.exports.split(",")):
        label, directory = spec.split("=", 1)
        from app.runtime import sessions

        from models import gdn_plan, manifest
        from models.qwen35 import gate

        session = sessions.create(directory + "/model.onnx", device).session
        shared = gdn_plan.shared_head(manifest.read(directory))  # a prompt head per pass: the first half
        finals = []
        for ids in prompts:
            feeds = gate.feeds(ids.cpu().numpy(), shared)
            finals.append(torch.from_numpy(session.run(None, feeds)[0][0].astype(np.float32)))
        record("onnx-" + label, finals)
        del session
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
