"""Random-weight Clef-Flash checkpoints in the published layout (export-time only: needs torch and,
for the head, the `clef-finetune` package's vendored copy of Cloudflare's joint_schema_model.py).

The layout of `Cloudflare/clef-flash` (models.md §5.1): a tiny Qwen3.5 backbone saved by
transformers as `Qwen3_5ForConditionalGeneration` (untied, with its `lm_head`, and the locally
trained Qwen-style tokenizer), plus `joint_head.safetensors` (BF16) of the reference
`JointSchemaHead`, `joint_head_config.json` and a copy of `joint_schema_model.py` itself.

    reference() -> module                       # the vendored joint_schema_model.py
    build(out: str, seed: int = 0, layers: int = 2) -> str

    python -m models.clef_flash.random_checkpoint OUT
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil

from models.qwen35 import random_checkpoint as backbone
from models.qwen35.dims import TextDims

REFERENCE_FILE = "joint_schema_model.py"


def reference():
    """Cloudflare's joint_schema_model.py, unmodified (clef-finetune 0.1.0 `_vendor`, SHA-256 0e304cf7…)."""
    from clef_finetune._vendor import joint_schema_model

    return joint_schema_model


def tiny_head_config(hidden_size: int, layers: int = 2) -> dict:
    return {
        "hidden_size": hidden_size,
        "width": 32,
        "routing_layers": 2,
        "layers": layers,
        "heads": 2,
        "feedforward": 64,
    }


def scale_like_trained(head, seed: int) -> None:
    """Spread the logits like a trained head's: PyTorch's init leaves the norms at identity, the
    logit scales at 1 and the residual gate at 0.5, which makes every option look alike."""
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in head.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.copy_(1.0 + 0.2 * torch.randn(module.weight.shape, generator=g))
                module.bias.normal_(0.0, 0.2, generator=g)
            elif isinstance(module, torch.nn.Linear):
                module.weight.normal_(0.0, 1.0 / math.sqrt(module.in_features), generator=g)
                if module.bias is not None:
                    module.bias.normal_(0.0, 0.1, generator=g)
        head.residual_scorer[3].weight.mul_(4.0)
        head.prior_logit_scale.fill_(math.log(3.0))
        head.joint_logit_scale.fill_(math.log(6.0))
        head.residual_gate.fill_(0.5)


def build(out: str, seed: int = 0, layers: int = 2) -> str:
    """Write a tiny random Clef-Flash checkpoint into `out`; returns `out`."""
    import torch
    from safetensors.torch import save_file

    backbone.build(out, size="tiny", tied=False, layout="conditional", seed=seed)
    ref = reference()
    config = tiny_head_config(TextDims.from_dir(out).hidden_size, layers)
    torch.manual_seed(seed)
    head = ref.JointSchemaHead(**config)
    scale_like_trained(head, seed)
    weights = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in head.state_dict().items()}
    save_file(weights, os.path.join(out, "joint_head.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "joint_head_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    shutil.copy(ref.__file__, os.path.join(out, REFERENCE_FILE))
    return out


FULL_HEAD = {"width": 1024, "routing_layers": 2, "layers": 4, "heads": 16, "feedforward": 4096}


def build_full(base: str, out: str, seed: int = 0) -> str:
    """A full-size checkpoint for GPU benchmarks: the files of an existing full-size random
    backbone (linked, not copied) plus a published-size random head. The head is our
    head_graph module, whose state dict has the reference class's keys and shapes, so this needs
    no clef-finetune; there is no joint_schema_model.py copy."""
    import torch
    from safetensors.torch import save_file

    from models.clef_flash.head_graph import ClefJointHead

    os.makedirs(out, exist_ok=True)
    for name in os.listdir(base):
        if not os.path.exists(os.path.join(out, name)):
            os.symlink(os.path.abspath(os.path.join(base, name)), os.path.join(out, name))
    config = dict(FULL_HEAD, hidden_size=TextDims.from_dir(base).hidden_size)
    torch.manual_seed(seed)
    head = ClefJointHead(**config)
    scale_like_trained(head, seed)
    weights = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in head.state_dict().items()}
    save_file(weights, os.path.join(out, "joint_head.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "joint_head_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--full", metavar="BASE", help="a full-size head on this full-size random backbone")
    args = ap.parse_args(argv)
    print(build_full(args.full, args.out, args.seed) if args.full else build(args.out, args.seed, args.layers))


if __name__ == "__main__":
    main()
