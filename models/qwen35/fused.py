"""RMSNorm and causal attention as torch custom ops that export to single ONNX Runtime kernels.

Traced from plain torch ops, each RMSNorm becomes an fp32 chain of eight kernels (Cast, Pow,
ReduceMean, Add, Sqrt, Div, Mul, Cast) and each attention a decomposed QKᵀ/mask/Softmax/V chain
with the KV heads copied out to the query heads; those chains, not the matrix products, would
take most of the kernel time. Emitting the kernels directly:

* `rms_norm` → `SimplifiedLayerNormalization` (ONNX Runtime's, in the default domain;
  statistics in fp32 whatever the input type, `stash_type=1`). The scale passed in is already
  `offset + w`, so zero-centred and plain norms are one op.
* `add_rms_norm` (a residual add and the norm after it) → com.microsoft
  `SkipSimplifiedLayerNormalization` with the block's output as its input and the residual
  stream as its skip: it returns the norm and the sum, which carries the stream on, so the
  residual adds launch nothing of their own (two a layer). ONNX Runtime's own fusion does not
  fire on these graphs.
* `causal_attention` → com.microsoft `GroupQueryAttention` (flash / memory-efficient attention
  on CUDA for fp16 and bf16, a CPU kernel for fp32 tests): KV heads shared, not copied; causal.
  Its per-row lengths (`seqlens_k`) are counted once a pass, not once a layer.
  ONNX Runtime's CUDA provider has no fp32 kernel for it, so float32 exports keep the traced
  attention ("sdpa"); `attention_for(dtype)` picks.
* `rotary` (partial RoPE on the first `rot` dims of each head) → com.microsoft `RotaryEmbedding`,
  one kernel for q and one for k; traced, rotate-half is nine (three slices, a negation, two
  concats, two products and a sum). The attention layer uses it with `GroupQueryAttention`.

The torch implementations are the reference maths the tests compare against.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


def attention_for(dtype: str) -> str:
    """The fused kernel ("gqa") where the CUDA provider has it (fp16/bf16), else traced SDPA."""
    return "sdpa" if dtype == "float32" else "gqa"


@torch.library.custom_op("omni_qwen35::rms_norm", mutates_args=())
def rms_norm(x: torch.Tensor, scale: torch.Tensor, eps: float) -> torch.Tensor:
    """x · rsqrt(mean x² + eps) · scale over the last axis, statistics in fp32, result in x's dtype."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * scale.float()).to(x.dtype)


@rms_norm.register_fake
def _(x, scale, eps):
    return torch.empty_like(x)


@torch.library.custom_op("omni_qwen35::add_rms_norm", mutates_args=())
def add_rms_norm(
    delta: torch.Tensor, x: torch.Tensor, scale: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(rms_norm(x + delta), x + delta): a residual add and the norm after it, the sum in x's dtype."""
    total = x + delta
    return rms_norm(total, scale, eps), total


@add_rms_norm.register_fake
def _(delta, x, scale, eps):
    return torch.empty_like(x), torch.empty_like(x)


def attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """q [B, T, Hq, D], k and v [B, T, Hkv, D] → [B, T, Hq·D]; causal, query head h reads KV head
    h // (Hq / Hkv). Plain torch ops: traced as they are for "sdpa" exports."""
    b, t, hq, d = q.shape
    rep = hq // k.shape[2]
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    return o.transpose(1, 2).reshape(b, t, hq * d)


def suffix_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """q [B, T, Hq, D] at the last T of the S positions of k and v [B, S, Hkv, D] (a prompt
    head's keys and values ahead of the rows'), causal: query i reads keys 0..S-T+i. → [B, T,
    Hq·D]. Plain torch ops, so a pass computes T rows of scores, not S (a causal kernel would
    need a query at every head position); the query heads are grouped by KV head, so keys and
    values are not repeated, and the softmax runs in fp32."""
    b, t, hq, d = q.shape
    s, hkv = k.shape[1], k.shape[2]
    rep = hq // hkv
    qg = q.reshape(b, t, hkv, rep, d).permute(0, 2, 3, 1, 4)  # [B, Hkv, rep, T, D]
    kg, vg = (x.permute(0, 2, 1, 3)[:, :, None] for x in (k, v))  # [B, Hkv, 1, S, D]
    scores = torch.matmul(qg, kg.transpose(-1, -2)).float() * scale  # [B, Hkv, rep, T, S]
    allowed = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(s - t)
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1).to(v.dtype)
    o = torch.matmul(weights, vg)  # [B, Hkv, rep, T, D]
    return o.permute(0, 3, 1, 2, 4).reshape(b, t, hq * d)


@torch.library.custom_op("omni_qwen35::seqlens_k", mutates_args=())
def seqlens_k(x: torch.Tensor, head: int = 0) -> torch.Tensor:
    """GroupQueryAttention's `seqlens_k` for x [B, T, ...] after a prompt head of `head` tokens:
    head + T - 1 for every row (int32 [B]). Made once a pass from the embeddings and read by
    every attention layer."""
    return torch.full((x.shape[0],), head + x.shape[1] - 1, dtype=torch.int32, device=x.device)


@seqlens_k.register_fake
def _(x, head=0):
    return x.new_empty((x.shape[0],), dtype=torch.int32)


@torch.library.custom_op("omni_qwen35::causal_attention", mutates_args=())
def causal_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, scale: float
) -> torch.Tensor:
    """attention_reference as one op, exported as GroupQueryAttention; `lengths` is `seqlens_k`
    (every row is full length in torch)."""
    return attention_reference(q, k, v, scale)


@causal_attention.register_fake
def _(q, k, v, lengths, scale):
    b, t, hq, d = q.shape
    return q.new_empty((b, t, hq * d))


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE on the first 2·cos.shape[-1] dims of each head of x [B, T, H, D] (pairs i,
    i + rot/2); cos and sin [T, rot/2] in x's dtype. The rest of each head passes through."""
    half = cos.shape[-1]
    cos, sin = torch.cat((cos, cos), dim=-1)[:, None], torch.cat((sin, sin), dim=-1)[:, None]
    xr, rest = x[..., : 2 * half], x[..., 2 * half :]
    rotated = torch.cat((-xr[..., half:], xr[..., :half]), dim=-1)
    return torch.cat((xr * cos + rotated * sin, rest), dim=-1)


@torch.library.custom_op("omni_qwen35::rotary", mutates_args=())
def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """`rope` as one op, exported as RotaryEmbedding."""
    return rope(x, cos, sin)


@rotary.register_fake
def _(x, cos, sin):
    return torch.empty_like(x)


def translations() -> dict:
    """torch.onnx custom_translation_table entries for both ops."""
    from onnxscript import opset18 as op

    from models import onnx_ops

    ms, ort = onnx_ops.opsets()

    def norm(x, scale, eps):
        # Declared outputs are all produced by the tracer; the optional statistics go unused.
        y, _inv_std = ort.SimplifiedLayerNormalization(
            x, op.CastLike(scale, x), axis=-1, epsilon=eps, stash_type=1, _outputs=2
        )
        return y

    def lengths(x, head=0):
        # Every row is treated as full length: trailing pads sit after each real row's last
        # token, and causality keeps them out of it (graph.py). T - 1 per row is counted on the
        # device from x itself: computed on the host from Shape it would need a host-to-device
        # copy, and ONNX Runtime refuses CUDA-graph capture with one (it also moves integer ops
        # fed by shapes to the host, hence a float count).
        first = op.Slice(
            x, op.Constant(value_ints=[0]), op.Constant(value_ints=[1]), op.Constant(value_ints=[2])
        )  # [B, T, 1]
        count = op.ReduceSum(
            op.Cast(op.Not(op.IsNaN(first)), to=1), op.Constant(value_ints=[1, 2]), keepdims=0
        )  # [B] = T
        return op.Cast(op.Add(count, op.Constant(value_float=float(head - 1))), to=6)

    def attention(q, k, v, seqlens_k, scale):
        hq, d, hkv = q.shape[2], q.shape[3], k.shape[2]
        shape = op.Shape(q)
        bt = op.Slice(shape, op.Constant(value_ints=[0]), op.Constant(value_ints=[2]))
        seq = op.Slice(shape, op.Constant(value_ints=[1]), op.Constant(value_ints=[2]))
        # total_sequence_length is a host input of the kernel, so the host computes it.
        total = op.Cast(op.Squeeze(seq), to=6)

        def packed(x, heads):
            return op.Reshape(x, op.Concat(bt, op.Constant(value_ints=[heads * d]), axis=0))

        outputs = ms.GroupQueryAttention(
            packed(q, hq),
            packed(k, hkv),
            packed(v, hkv),
            None,
            None,
            seqlens_k,
            total,
            num_heads=hq,
            kv_num_heads=hkv,
            scale=float(scale),
            _outputs=3,
        )
        return outputs[0]

    def rotary_embedding(x, cos, sin):
        # Heads packed as [B, T, H·D], the layout the kernel and GroupQueryAttention read; the
        # positions are 0..T-1, given as their start: a constant, so nothing crosses from the host
        # (which CUDA-graph capture refuses). The tables are per pass, T rows.
        heads, d = x.shape[2], x.shape[3]
        shape = op.Shape(x)
        packed = op.Reshape(
            x,
            op.Concat(
                op.Slice(shape, op.Constant(value_ints=[0]), op.Constant(value_ints=[2])),
                op.Constant(value_ints=[heads * d]),
                axis=0,
            ),
        )
        y = ms.RotaryEmbedding(
            packed,
            op.Constant(value_ints=[0]),
            cos,
            sin,
            num_heads=heads,
            rotary_embedding_dim=2 * cos.shape[-1],
            interleaved=0,
        )
        return op.Reshape(y, shape)

    def add_norm(delta, x, scale, eps):
        # Output 3 is the sum, which carries the residual stream on; the statistics go unused and
        # are unnamed after the export (onnx_ops.unname_unused).
        y, _mean, _inv_std, total = ms.SkipSimplifiedLayerNormalization(
            delta, x, op.CastLike(scale, x), epsilon=eps, _outputs=4
        )
        return y, total

    return {
        torch.ops.omni_qwen35.rms_norm.default: norm,
        torch.ops.omni_qwen35.add_rms_norm.default: add_norm,
        torch.ops.omni_qwen35.causal_attention.default: attention,
        torch.ops.omni_qwen35.seqlens_k.default: lengths,
        torch.ops.omni_qwen35.rotary.default: rotary_embedding,
    }
