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
    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules=LORA_TARGETS,
                        bias="none")
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

    head = {"weight": torch.randn(1, hidden, generator=gen) * hidden ** -0.5,
            "bias": torch.randn(1, generator=gen) * 0.1}
    torch.save(head, os.path.join(package, "head.pt"))
    with open(os.path.join(package, "model.json"), "w", encoding="utf-8") as f:
        json.dump({"model_id": pinned.model_id, "revision": pinned.base_revision,
                   "method": "independent_candidate_lora_nll_brier", "lora_rank": rank,
                   "random_weights": True}, f, indent=2)
    with open(os.path.join(package, "temperature.json"), "w", encoding="utf-8") as f:
        json.dump({"temperature": pinned.temperature}, f)
    return package


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--variant", default="9b", choices=sorted(VARIANTS))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(build(args.out, args.variant, args.seed))


if __name__ == "__main__":
    main()
