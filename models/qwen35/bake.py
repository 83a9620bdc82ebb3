"""The exporter's side of a baked prompt head (models/qwen35/prefix.py): run the head once, in
float32, and store what the rest of the prompt reads from it in the graph.

Public:
    capture(module, ids, device="cpu") -> (per-layer states, final-norm hidden [1, P, H] fp32)
    bake(module, ids, device="cpu") -> None                      # capture, then module.set_prefix
    bake_for_export(module, tokenizer_dir, head_ids, device, progress) -> manifest "prefix"
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from models.qwen35.gate import _exact_float32, float32_copy, float32_layers
from models.tokenizer import TokenizerHandle


def capture(module, ids: Sequence[int], device: str = "cpu") -> tuple[list[tuple], torch.Tensor]:
    """What each layer of `module` (a graph.Backbone, any dtype) keeps from the prompt head `ids`,
    computed in float32 one layer at a time on `device` (as the parity gate's reference) and
    returned in the module's dtype (GDN states stay float32, as the kernels hold them), on the CPU;
    and the head's final-norm hidden states, float32."""
    dtype = module.embed_tokens.weight.dtype
    out = []
    with torch.no_grad(), _exact_float32():
        index = torch.tensor(list(ids), dtype=torch.long)
        x = module.embed_tokens.weight[index].to(device=device, dtype=torch.float32)[None]
        cos, sin = module.rope(x.shape[1], device, torch.float32)
        for ref in float32_layers(module, device):
            gdn = ref.kind == "linear_attention"
            taken: list = []
            h = ref.input_layernorm(x)
            x = x + (ref.linear_attn(h, capture=taken) if gdn else ref.self_attn(h, cos, sin, capture=taken))
            x = x + ref.mlp(ref.post_attention_layernorm(x))
            first, second = taken  # GDN: conv inputs, state; attention: keys, values
            out.append((first.to(dtype).cpu(), (second.float() if gdn else second.to(dtype)).cpu()))
        hidden = float32_copy(module.norm, device)(x).cpu()
    if device == "cuda":
        torch.cuda.empty_cache()
    return out, hidden


def bake(module, ids: Sequence[int], device: str = "cpu") -> None:
    """Bake the head `ids` into `module`: its rows then start after them."""
    module.set_prefix(list(ids), *capture(module, ids, device))


def bake_for_export(module, tokenizer_dir: str, head_ids: Callable, device: str, progress) -> dict:
    """An exporter's step: bake the head `head_ids(tokenizer)` gives (the checkpoint's tokenizer)
    into `module`; returns what the manifest records as "prefix"."""
    ids = list(head_ids(TokenizerHandle.load(tokenizer_dir)))
    progress("      baking the prompt head in (%d tokens, float32 on %s)" % (len(ids), device))
    bake(module, ids, device)
    return {"ids": ids, "tokens": len(ids)}


__all__ = ["capture", "bake", "bake_for_export"]
