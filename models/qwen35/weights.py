"""Read the text stack of a Qwen3.5 checkpoint and merge PEFT LoRA adapters into it.

Published checkpoints are multimodal (`model.language_model.*`, `model.visual.*`, `lm_head.*`,
maybe `mtp.*`); a text-only `save_pretrained` writes `model.*`. Both become one flat dict named
like `Qwen3_5TextModel`'s state dict (`layers.3.self_attn.q_proj.weight`, `embed_tokens.weight`,
`norm.weight`) plus `lm_head.weight` when untied. Only the shards holding text tensors are read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

_PREFIXES = ("model.language_model.", "model.")
_SKIP = ("model.visual.", "mtp.", "model.mtp.")


def _shards(directory: str) -> dict[str, str]:
    """tensor name → shard file."""
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index, encoding="utf-8") as f:
            return dict(json.load(f)["weight_map"])
    single = os.path.join(directory, "model.safetensors")
    if not os.path.exists(single):
        raise FileNotFoundError("%s has neither model.safetensors nor model.safetensors.index.json" % directory)
    from safetensors import safe_open

    with safe_open(single, "pt") as f:
        return {k: "model.safetensors" for k in f.keys()}  # noqa: SIM118 - safe_open is not iterable


def text_name(key: str) -> str | None:
    """The text-model name of a checkpoint key, or None for tensors the text stack does not use."""
    if key.startswith(_SKIP):
        return None
    if key == "lm_head.weight":
        return key
    for prefix in _PREFIXES:
        if key.startswith(prefix):
            return key[len(prefix) :]
    return None


def load_text_state(directory: str, dtype=None) -> dict:
    """The text stack's tensors, renamed (see module doc); `dtype` casts floating tensors. A
    described random checkpoint (random_checkpoint.DESCRIBED) is drawn instead of read."""
    from safetensors import safe_open

    from models.qwen35 import random_checkpoint

    drawn = random_checkpoint.described_state(directory, dtype)
    if drawn is not None:
        return {name: t for k, t in drawn.items() if (name := text_name(k)) is not None}
    by_file: dict[str, list[str]] = {}
    for key, shard in _shards(directory).items():
        if text_name(key) is not None:
            by_file.setdefault(shard, []).append(key)
    state = {}
    for shard, keys in sorted(by_file.items()):
        with safe_open(os.path.join(directory, shard), "pt") as f:
            for key in keys:
                t = f.get_tensor(key)
                state[text_name(key)] = t.to(dtype) if dtype is not None and t.is_floating_point() else t
    if "embed_tokens.weight" not in state:
        raise ValueError(
            "%s: no text embedding found (expected model.language_model.embed_tokens.weight "
            "or model.embed_tokens.weight)" % directory
        )
    return state


def first_tensor(directory: str, keys: Iterable[str]):
    """The first of `keys` (checkpoint names) the checkpoint holds, as stored, or None: read from
    its one file or its shards, or drawn from a described random checkpoint."""
    from safetensors import safe_open

    from models.qwen35 import random_checkpoint

    keys = list(keys)
    drawn = random_checkpoint.described_state(directory, only=set(keys))
    if drawn is None:
        shards = _shards(directory)
        key = next((k for k in keys if k in shards), None)
        if key is None:
            return None
        with safe_open(os.path.join(directory, shards[key]), "pt") as f:
            return f.get_tensor(key)
    return next((drawn[k] for k in keys if k in drawn), None)


def _adapter_weights(adapter_dir: str) -> dict:
    st = os.path.join(adapter_dir, "adapter_model.safetensors")
    if os.path.exists(st):
        from safetensors.torch import load_file

        return load_file(st)
    binary = os.path.join(adapter_dir, "adapter_model.bin")
    if os.path.exists(binary):
        import torch

        return torch.load(binary, map_location="cpu", weights_only=True)
    raise FileNotFoundError("%s: no adapter_model.safetensors or adapter_model.bin" % adapter_dir)


def adapter_config(adapter_dir: str) -> dict:
    with open(os.path.join(adapter_dir, "adapter_config.json"), encoding="utf-8") as f:
        return json.load(f)


def merge_lora(state: dict, adapter_dir: str, allowed: Iterable[str] | None = None) -> list[str]:
    """Merge a PEFT LoRA adapter into `state` in place: W += (alpha/r)·B·A, computed in fp32 and
    rounded once to W's dtype. Returns the merged weight names. `allowed`: module suffixes the
    adapter may target (e.g. "self_attn.q_proj"); anything else is refused, not ignored."""
    import torch

    cfg = adapter_config(adapter_dir)
    if cfg.get("peft_type", "LORA") != "LORA":
        raise ValueError("%s: peft_type %r is not LoRA" % (adapter_dir, cfg.get("peft_type")))
    if cfg.get("use_dora") or cfg.get("use_rslora"):
        raise ValueError("%s: DoRA / rsLoRA adapters are not supported" % adapter_dir)
    r, alpha = cfg["r"], cfg["lora_alpha"]
    ranks, alphas = cfg.get("rank_pattern") or {}, cfg.get("alpha_pattern") or {}
    if ranks or alphas:
        raise ValueError("%s: per-module rank/alpha patterns are not supported" % adapter_dir)
    scale = alpha / r
    weights = _adapter_weights(adapter_dir)
    pairs: dict[str, dict[str, torch.Tensor]] = {}
    for key, t in weights.items():
        for part in ("lora_A", "lora_B"):
            marker = ".%s." % part
            if marker in key:
                module = key.split(marker)[0]
                pairs.setdefault(module, {})[part] = t
                break
        else:
            raise ValueError("%s: unexpected adapter tensor %r (only LoRA A/B are merged)" % (adapter_dir, key))
    merged = []
    for module, ab in sorted(pairs.items()):
        if set(ab) != {"lora_A", "lora_B"}:
            raise ValueError("%s: %s lacks its lora_A or lora_B" % (adapter_dir, module))
        name = module
        for prefix in ("base_model.model.",):
            if name.startswith(prefix):
                name = name[len(prefix) :]
        # Adapters saved on the causal LM name `model.layers.*`, on the image-text model
        # `model.language_model.layers.*`, on the bare text model `layers.*`.
        name = text_name(name + ".weight") if name.startswith(("model.", "lm_head")) else name + ".weight"
        if name is None or name not in state:
            raise ValueError("%s: adapter targets %r, which is not a text-model weight" % (adapter_dir, module))
        if allowed is not None and not any(name.endswith(s + ".weight") for s in allowed):
            raise ValueError("%s: adapter targets %s, outside the expected modules" % (adapter_dir, name))
        w = state[name]
        delta = (ab["lora_B"].float() @ ab["lora_A"].float()) * scale
        state[name] = (w.float() + delta).to(w.dtype)
        merged.append(name)
    return merged
