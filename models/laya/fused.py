"""ModernBERT's rotary embedding and attention as torch custom ops that export to single ONNX
Runtime kernels (export-time only: needs torch).

Traced from plain torch ops, each encoder layer's attention was ~25 small kernels (slices,
negations and concats of the rotary embedding in fp32, the split heads, transposes, QKᵀ, the
mask, softmax, the V product); with the whole forward launch-bound at serving batch sizes, the
kernel count is the cost. Emitting the kernels directly:

* `rotary` → com.microsoft `RotaryEmbedding` (non-interleaved halves, as ModernBERT's
  `rotate_half`; one cos/sin cache per layer type, position 0 first);
* `attention` → com.microsoft `MultiHeadAttention` with an additive `attention_bias`
  [B, 1, T, T] that carries the key padding and, in sliding layers, the local window;
* `gelu` → com.microsoft `Gelu` (exact, erf): traced, `nn.GELU` became five elementwise kernels
  that ONNX Runtime's fusion did not recognise in the dynamo export.

The encoder and decision layers call them when exported with `attention="mha"` (the default);
`"sdpa"` traces the reference maths below instead, the same functions the ops run in torch.
"""
from __future__ import annotations

import torch
from torch.nn import functional as F

ATTENTION = ("sdpa", "mha")
# Additive bias of a masked key: exp(-1e4 + logit) is 0 in fp16 and fp32, and it is finite, so
# a row whose every key is masked (a pad query outside every real token's window) stays finite
# and cannot put NaNs into the values real rows read with weight 0.
MASKED = -1.0e4


def attention_for(requested: str = "auto") -> str:
    """"auto" is the fused kernels: ONNX Runtime's CUDA provider has both in fp32 and fp16."""
    if requested == "auto":
        return "mha"
    if requested not in ATTENTION:
        raise ValueError("unknown attention %r (known: auto, %s)" % (requested, ", ".join(ATTENTION)))
    return requested


def kernels(mode: str) -> tuple:
    """(rotary, attention, exact GELU) for an export mode: the custom ops ("mha") or the same
    maths as plain torch ops ("sdpa"). Defined below; looked up when called."""
    if mode == "mha":
        return rotary, attention, gelu
    return rotary_reference, attention_reference, F.gelu


def rotary_reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, heads: int) -> torch.Tensor:
    """x [B, T, H·D] rotated at positions 0..T-1; cos/sin [P, D/2]. In fp32, as transformers'
    ModernBERT does, then back to x's dtype."""
    b, t, hd = x.shape
    d = hd // heads
    xf = x.float().reshape(b, t, heads, d)
    c, s = (torch.cat([z[:t], z[:t]], -1).float()[None, :, None, :] for z in (cos, sin))
    rotated = torch.cat([-xf[..., d // 2:], xf[..., : d // 2]], -1)
    return (xf * c + rotated * s).to(x.dtype).reshape(b, t, hd)


def attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor,
                        heads: int, scale: float) -> torch.Tensor:
    """Bidirectional attention: q, k, v [B, T, H·D], additive bias [B, 1, T, T] → [B, T, H·D]."""
    b, t, hd = q.shape
    q, k, v = (z.reshape(b, t, heads, hd // heads).transpose(1, 2) for z in (q, k, v))
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype), scale=scale)
    return o.transpose(1, 2).reshape(b, t, hd)


@torch.library.custom_op("omni_laya::rotary", mutates_args=())
def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, heads: int) -> torch.Tensor:
    return rotary_reference(x, cos, sin, heads)


@rotary.register_fake
def _(x, cos, sin, heads):
    return torch.empty_like(x)


@torch.library.custom_op("omni_laya::attention", mutates_args=())
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, heads: int,
              scale: float) -> torch.Tensor:
    return attention_reference(q, k, v, bias, heads, scale)


@attention.register_fake
def _(q, k, v, bias, heads, scale):
    return torch.empty_like(q)


@torch.library.custom_op("omni_laya::gelu", mutates_args=())
def gelu(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x)


@gelu.register_fake
def _(x):
    return torch.empty_like(x)


def translations() -> dict:
    """torch.onnx custom_translation_table entries for the ops above."""
    from onnxscript import opset18 as op

    from models import onnx_ops

    ms, _ = onnx_ops.opsets()

    def rotary_embedding(x, cos, sin, heads):
        # position_ids of shape [1] is the first position: every row starts at 0.
        return ms.RotaryEmbedding(x, op.Constant(value_ints=[0]), op.CastLike(cos, x), op.CastLike(sin, x),
                                  interleaved=0, num_heads=heads)

    def multi_head_attention(q, k, v, bias, heads, scale):
        return ms.MultiHeadAttention(q, k, v, None, None, op.CastLike(bias, q), num_heads=heads,
                                     scale=float(scale))

    def exact_gelu(x):
        return ms.Gelu(x)

    return {torch.ops.omni_laya.rotary.default: rotary_embedding,
            torch.ops.omni_laya.attention.default: multi_head_attention,
            torch.ops.omni_laya.gelu.default: exact_gelu}
