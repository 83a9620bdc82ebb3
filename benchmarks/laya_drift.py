"""How far Laya exports' option probabilities are from the fp32 torch model of their checkpoint.

    python -m benchmarks.laya_drift --checkpoint CK --export a=EX_A --export b=EX_B [--batches 40]

The export's own gate checks 3 shapes. This tool runs `--batches` random padded batches of 12
rows (lengths 20-219, 2-6 markers) through each export (ONNX Runtime, `--device`) and through
the torch reference, and reports the distribution of each row's largest probability difference:
median, p99 and max. A graph change that leaves the maths alone should leave the distribution
alone; one fp16 rounding that cascades shows in the median first.
"""

from __future__ import annotations

import argparse
import json
import os
import warnings


def reference_model(checkpoint: str):
    """The checkpoint's torch model in float32 with traced attention (the maths every export is
    checked against), built from its configs and weights."""
    import torch
    from safetensors.torch import load_file

    from models.laya.graph import LayaDecisionGraph, build_encoder

    with open(os.path.join(checkpoint, "rl_agent_config.json"), encoding="utf-8") as f:
        agent = json.load(f)
    with open(os.path.join(checkpoint, "encoder", "config.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    model = LayaDecisionGraph(build_encoder(encoder), agent["head_layers"], len(agent.get("act_costs", {})) + 1, "sdpa")
    weights = {k: v.to(torch.float32) for k, v in load_file(os.path.join(checkpoint, "model.safetensors")).items()}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if [k for k in missing if k != "temperature"] or unexpected:
        raise ValueError(
            "%s does not match Laya's graph: missing %s, unexpected %s" % (checkpoint, missing[:8], unexpected[:8])
        )
    return model.eval(), encoder.get("vocab_size", 1000)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True, help="the Laya checkpoint directory the exports came from")
    ap.add_argument("--export", action="append", required=True, help="LABEL=PATH or PATH; repeatable")
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")

    import numpy as np
    import torch

    from app.runtime import sessions
    from models.laya import export as laya_export

    reference, vocab = reference_model(args.checkpoint)
    exports = dict(e.split("=", 1) if "=" in e else (e, e) for e in args.export)
    runners = {
        label: sessions.create(os.path.join(path, "model.onnx"), args.device).session for label, path in exports.items()
    }
    drifts: dict[str, list[float]] = {label: [] for label in runners}
    for seed in range(args.batches):
        feeds = laya_export.example_batch(vocab, 12, 20 + (seed * 37) % 200, 2 + seed % 5, seed=100 + seed)
        with torch.no_grad():
            ref = reference(*feeds)[0].numpy()
        arrays = dict(zip(laya_export.INPUTS, (t.numpy() for t in feeds)))
        refs = laya_export.option_distributions(ref, arrays["marker_mask"])
        for label, runner in runners.items():
            got = laya_export.option_distributions(runner.run(None, arrays)[0], arrays["marker_mask"])
            drifts[label] += [float(np.abs(a - b).max()) for a, b in zip(got, refs)]
    report = {"checkpoint": args.checkpoint, "exports": exports, "device": args.device, "rows": {}, "drift": {}}
    for label, values in drifts.items():
        d = np.asarray(values)
        report["rows"][label] = int(d.size)
        report["drift"][label] = {
            "median": float(np.median(d)),
            "p99": float(np.percentile(d, 99)),
            "max": float(d.max()),
        }
        r = report["drift"][label]
        print("%-12s %d rows: drift median %.2e  p99 %.2e  max %.2e" % (label, d.size, r["median"], r["p99"], r["max"]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)
    return report


if __name__ == "__main__":
    main()
