"""Random-weight Open-Jev packages in the upstream layout, for tests (export-time only: torch, peft).

    OUT/base/         a tiny random Qwen3.5 checkpoint (models.qwen35.random_checkpoint)
    OUT/checkpoint/   model.json, temperature.json, head.pt, adapter/ (PEFT LoRA)

The LoRA is rank 8 on the text stack's attention and MLP projections, saved against
`.model.language_model` as upstream's export applies it, with nonzero random B so merging it
changes the weights (a freshly initialised LoRA has B = 0 and merges to a no-op).

    python -m models.open_jev.random_checkpoint OUT --variant 9b
"""

from __future__ import annotations

import argparse
import json
import os

from models.open_jev.checkpoint import VARIANTS

LORA_RANK = 8
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def build(out: str, variant: str = "9b", seed: int = 0, rank: int = LORA_RANK) -> str:
    """Write a base and an upstream-layout package under `out`; returns the package directory."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText

    from models.qwen35 import random_checkpoint as qwen35

    pinned = VARIANTS[variant]
    base = qwen35.build(os.path.join(out, "base"), size="tiny", tied=False, seed=seed)
    package = os.path.join(out, "checkpoint")
    os.makedirs(package, exist_ok=True)

    full = AutoModelForImageTextToText.from_pretrained(base, dtype=torch.bfloat16)
    language_model = full.model.language_model
    hidden = language_model.config.hidden_size
    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules=LORA_TARGETS, bias="none")
    lora = get_peft_model(language_model, config)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, param in lora.named_parameters():
            if ".lora_A." in name or ".lora_B." in name:
                # A ~ 1/sqrt(fan_in) like kaiming, B small but nonzero: a visible, stable delta.
                scale = param.shape[1] ** -0.5 if ".lora_A." in name else 0.05
                param.copy_(torch.randn(param.shape, generator=gen) * scale)
    adapter = os.path.join(package, "adapter")
    lora.save_pretrained(adapter, save_embedding_layers=False)
    # Name the base as upstream's adapters do, after saving: set before, peft looks it up online.
    config_path = os.path.join(adapter, "adapter_config.json")
    with open(config_path, encoding="utf-8") as f:
        adapter_config = json.load(f)
    adapter_config["base_model_name_or_path"] = pinned.model_id
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(adapter_config, f, indent=2)

    head = {"weight": torch.randn(1, hidden, generator=gen) * hidden**-0.5, "bias": torch.randn(1, generator=gen) * 0.1}
    torch.save(head, os.path.join(package, "head.pt"))
    with open(os.path.join(package, "model.json"), "w", encoding="utf-8") as f:
        json.dump(
            {
                "model_id": pinned.model_id,
                "revision": pinned.base_revision,
                "method": "independent_candidate_lora_nll_brier",
                "lora_rank": rank,
                "random_weights": True,
            },
            f,
            indent=2,
        )
    with open(os.path.join(package, "temperature.json"), "w", encoding="utf-8") as f:
        json.dump({"temperature": pinned.temperature}, f)
    return package


def build_full(base: str, out: str, variant: str = "9b", seed: int = 0, rank: int = LORA_RANK) -> str:
    """A package on an existing full-size random base (a GPU benchmark's), written without peft:
    the adapter in PEFT's file layout (LoRA on every full-attention q_proj and MLP gate_proj),
    a random head at the base's width, the variant's model.json and temperature."""
    import torch
    from safetensors.torch import save_file

    from models.qwen35.dims import TextDims

    pinned = VARIANTS[variant]
    dims = TextDims.from_dir(base)
    gen = torch.Generator().manual_seed(seed)
    h, tensors = dims.hidden_size, {}
    for i, kind in enumerate(dims.layer_types):
        targets = [("mlp.gate_proj", dims.intermediate_size)]
        if kind == "full_attention":
            targets.append(("self_attn.q_proj", 2 * dims.num_attention_heads * dims.head_dim))
        for module, out_features in targets:
            key = "base_model.model.layers.%d.%s" % (i, module)
            tensors[key + ".lora_A.weight"] = torch.randn(rank, h, generator=gen) * h**-0.5
            tensors[key + ".lora_B.weight"] = torch.randn(out_features, rank, generator=gen) * 0.01
    package = os.path.join(out, "checkpoint")
    adapter = os.path.join(package, "adapter")
    os.makedirs(adapter, exist_ok=True)
    save_file(tensors, os.path.join(adapter, "adapter_model.safetensors"))
    with open(os.path.join(adapter, "adapter_config.json"), "w", encoding="utf-8") as f:
        json.dump(
            {
                "peft_type": "LORA",
                "r": rank,
                "lora_alpha": 2 * rank,
                "target_modules": ["q_proj", "gate_proj"],
                "base_model_name_or_path": pinned.model_id,
                "bias": "none",
            },
            f,
            indent=2,
        )
    torch.save(
        {"weight": torch.randn(1, h, generator=gen) * h**-0.5, "bias": torch.randn(1, generator=gen) * 0.1},
        os.path.join(package, "head.pt"),
    )
    with open(os.path.join(package, "model.json"), "w", encoding="utf-8") as f:
        json.dump(
            {"model_id": pinned.model_id, "revision": pinned.base_revision, "lora_rank": rank, "random_weights": True},
            f,
            indent=2,
        )
    with open(os.path.join(package, "temperature.json"), "w", encoding="utf-8") as f:
        json.dump({"temperature": pinned.temperature}, f)
    return package


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--variant", default="9b", choices=sorted(VARIANTS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--full", metavar="BASE", help="write only the package, on this full-size random base")
    args = ap.parse_args(argv)
    if args.full:
        print(build_full(args.full, args.out, args.variant, args.seed))
    else:
        print(build(args.out, args.variant, args.seed))


if __name__ == "__main__":
    main()
