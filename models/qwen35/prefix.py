"""A fixed prompt head computed once at export and baked into the graph.

Every Cua-S1 prompt starts with the same system turn, and every Clef-Flash record with its
system turn and `STATE:` line. A causal model's state
after them is the same for every request, so the exporter runs them once, in float32, and stores
what the rest of the prompt reads from them: per GDN layer the last K-1 conv inputs and the
recurrent state, per attention layer the (rotated) keys and the values (and, for a graph that
returns every position's hidden state, the head's final-norm hidden states). The served graph
then takes only the tokens after the head, at positions that start at its length (graph.py); the
served adapters cut the head off each row (`cut`). The manifest records the head's ids; the
server refuses an export whose head its own tokenizer and prompt would not produce (`check_head`).

Public:
    capture(module, ids, device="cpu") -> (per-layer states, final-norm hidden [1, P, H] fp32)
    bake(module, ids, device="cpu") -> None                      # capture, then module.set_prefix
    bake_for_export(module, tokenizer_dir, head_ids, device, progress) -> manifest "prefix"
    cut(row, head) -> the row after the head                     # InferenceFailed without it
    check_head(manifest, head_ids, name) -> None                 # ValueError on a stale export
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from models.errors import InferenceFailed

if TYPE_CHECKING:
    import torch


def capture(module, ids: Sequence[int], device: str = "cpu") -> tuple[list[tuple], "torch.Tensor"]:
    """What each layer of `module` (a graph.Backbone, any dtype) keeps from the prompt head `ids`,
    computed in float32 one layer at a time on `device` (as the parity gate's reference) and
    returned in the module's dtype (GDN states stay float32, as the kernels hold them), on the CPU;
    and the head's final-norm hidden states, float32."""
    import torch

    from models.qwen35.gate import _exact_float32, float32_copy, float32_layers

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
            first, second = taken           # GDN: conv inputs, state; attention: keys, values
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
    from models.tokenizer import TokenizerHandle

    ids = list(head_ids(TokenizerHandle.load(tokenizer_dir)))
    progress("      baking the prompt head in (%d tokens, float32 on %s)" % (len(ids), device))
    bake(module, ids, device)
    return {"ids": ids, "tokens": len(ids)}


def cut(row, head: Sequence[int]):
    """`row` after the graph's baked `head`; InferenceFailed when it does not start with it or
    holds nothing after it (the server checks the head at load, so this means a bug)."""
    n = len(head)
    if len(row) <= n or list(row[:n]) != list(head):
        raise InferenceFailed("a row does not start with the graph's baked prompt head (%d tokens)" % n)
    return row[n:]


def check_head(manifest: Mapping, head_ids: Sequence[int], name: str = "this export") -> None:
    """Refuse an export whose baked head is not the one this server's prompt and tokenizer give."""
    baked = (manifest.get("prefix") or {}).get("ids")
    if baked is not None and list(baked) != list(head_ids):
        raise ValueError("%s baked in a prompt head of %d tokens that differs from the %d tokens this server's "
                         "prompt encodes to; run its export command again" % (name, len(baked), len(head_ids)))


__all__ = ["capture", "bake", "bake_for_export", "cut", "check_head"]
