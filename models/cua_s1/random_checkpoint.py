"""Random-weight Cua-S1 checkpoints for tests (export-time only: needs torch, transformers, peft).

    build(out, seed=0, text_weights="safetensors") -> RandomCheckpoint

writes
    out/base/                 a tiny tied Qwen3.5 base in the published (image-text) layout
    out/adapter/text/         a PEFT LoRA saved by peft itself: r 16, alpha 32, q/k/v/o_proj in the
                              full-attention layers and gate/up/down_proj in every MLP
    out/adapter/multimodal/   the same language targets plus the vision tower's linear_fc1/fc2, on
                              the image-text model (`model.language_model.*` keys): must be refused

like the `cua-ai/cua-s1-4b-0.2` repo's two folders. PEFT initialises B to zero, which would make
merging a no-op; here A and B are both random, so a merged model differs from the base.

    python -m models.cua_s1.random_checkpoint OUT
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass

from models.cua_s1.checkpoint import BASE_REPO, MLP_TARGETS, ATTENTION_TARGETS

R, ALPHA = 16, 32
TEXT_TARGETS = list(ATTENTION_TARGETS + MLP_TARGETS)
MULTIMODAL_TARGETS = TEXT_TARGETS + ["linear_fc1", "linear_fc2"]


@dataclass(frozen=True)
class RandomCheckpoint:
    base: str
    adapter: str  # the repo-like folder holding text/ and multimodal/
    text: str
    multimodal: str


def _randomize(model, seed: int) -> None:
    """Random LoRA A and B (B ~ N(0, 0.02²)): the update 2·B·A is ~20% of a base weight."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if ".lora_A." in name:
                param.copy_(torch.randn(param.shape, generator=gen) / param.shape[1] ** 0.5)
            elif ".lora_B." in name:
                param.copy_(0.02 * torch.randn(param.shape, generator=gen))


def _save_adapter(model, targets: list[str], out: str, seed: int, safe: bool = True) -> str:
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=R, lora_alpha=ALPHA, lora_dropout=0.0, target_modules=targets, task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, config)
    _randomize(peft_model, seed)
    peft_model.save_pretrained(out, safe_serialization=safe)
    # Name the published base, not our temporary folder, as the real adapter_config.json does.
    path = os.path.join(out, "adapter_config.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    data["base_model_name_or_path"] = BASE_REPO
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
    return out


def build(out: str, seed: int = 0, text_weights: str = "safetensors") -> RandomCheckpoint:
    """`text_weights`: "safetensors" (adapter_model.safetensors) or "bin" (adapter_model.bin)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    from models.qwen35 import random_checkpoint as qwen35

    base = qwen35.build(os.path.join(out, "base"), size="tiny", tied=True, layout="conditional", seed=seed)
    adapter = os.path.join(out, "adapter")
    # Upstream loads `text` on the causal LM and `multimodal` on the image-text model; the
    # adapters are fp32 (PEFT keeps them so on a bf16 base too).
    text_model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    text = _save_adapter(
        text_model, TEXT_TARGETS, os.path.join(adapter, "text"), seed + 1, safe=text_weights == "safetensors"
    )
    image_text = AutoModelForImageTextToText.from_pretrained(base, dtype=torch.float32)
    multimodal = _save_adapter(image_text, MULTIMODAL_TARGETS, os.path.join(adapter, "multimodal"), seed + 2)
    return RandomCheckpoint(base, adapter, text, multimodal)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--text-weights", default="safetensors", choices=["safetensors", "bin"])
    args = ap.parse_args(argv)
    print(build(args.out, args.seed, args.text_weights))


if __name__ == "__main__":
    main()
