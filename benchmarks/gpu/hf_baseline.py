"""What users would otherwise run, timed on the same GPU in the same run as our server:
HF transformers eager (bf16) for Open-Jev, and transformers + Cloudflare's PyTorch joint head
(`systemone`, from clef-finetune's vendored joint_schema_model.py) for Clef-Flash.

    python -m benchmarks.gpu.hf_baseline --family open-jev --checkpoint BASE --export EX \
        --workload benchmarks/workloads/open_jev_noul.jsonl --out hf.json

Each request is timed end to end in-process (tokenization through answers), one at a time (c=1),
after `--warmup` untimed requests. Open-Jev candidates run one sequence per forward, as upstream's
9B path does; the head is the same float64 host head we serve.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", required=True, choices=["open-jev", "clef-flash"])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--export", required=True, help="our export (its tokenizer and preparation)")
    ap.add_argument("--workload", required=True, action="append")
    ap.add_argument("--requests", type=int, default=0, help="per workload (default: every line)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    from benchmarks.gpu.qwen_bench import hf_model
    from models.registry import load

    torch.set_grad_enabled(False)
    ours = load(args.export)
    hf = hf_model(args.checkpoint, torch.bfloat16)
    if args.family == "open-jev":
        from models.open_jev import finish as finishing

        def answer(body):
            prepared = ours.prepare(body)
            hidden = []
            for ids in prepared.work:
                h = hf.model(
                    input_ids=torch.from_numpy(np.asarray(ids, dtype=np.int64))[None].cuda(), use_cache=False
                ).last_hidden_state[0, -1]
                hidden.append(h.float().cpu().numpy())
            return finishing.finish(prepared.context, np.stack(hidden))
    else:
        import types

        from clef_finetune._vendor import joint_schema_model as ref
        from safetensors.torch import load_file
        from transformers import PreTrainedTokenizerFast

        with open(args.checkpoint + "/joint_head_config.json") as f:
            head = ref.JointSchemaHead(**json.load(f))
        head.load_state_dict(load_file(args.checkpoint + "/joint_head.safetensors"), strict=True)
        model = ref.ClefModel(hf, head.to(device="cuda", dtype=torch.bfloat16)).eval()
        tok = PreTrainedTokenizerFast(
            tokenizer_file=args.export + "/tokenizer.json", pad_token="<|endoftext|>", eos_token="<|im_end|>"
        )
        processor = types.SimpleNamespace(tokenizer=tok)

        def answer(body):
            return ref.systemone(model, processor, body)

    results = {"family": args.family, "gpu": torch.cuda.get_device_name(0), "workloads": {}}
    for path in args.workload:
        with open(path) as f:
            bodies = [json.loads(line) for line in f]
        bodies = bodies[: args.requests or len(bodies)]
        for body in bodies[: args.warmup]:
            answer(body)
        times = []
        for body in bodies:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            answer(body)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        s = sorted(times)
        results["workloads"][path.rsplit("/", 1)[-1]] = {
            "n": len(s),
            "mean_ms": round(statistics.fmean(s) * 1e3, 2),
            "p50_ms": round(statistics.median(s) * 1e3, 2),
            "p95_ms": round(s[int(0.95 * (len(s) - 1))] * 1e3, 2),
        }
        print(path, json.dumps(results["workloads"][path.rsplit("/", 1)[-1]]), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
