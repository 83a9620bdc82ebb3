"""ModernBERT's rotary embedding and attention as torch custom ops that export to single ONNX
Runtime kernels (export-time only: needs torch).

Traced from plain torch ops, each encoder layer's attention is ~25 small kernels (slices,
negations and concats of the rotary embedding in fp32, the split heads, transposes, QKᵀ, the
mask, softmax, the V product); with the whole forward launch-bound at serving batch sizes, the
kernel count is the cost. Emitting the kernels directly:

* `packed_rotary` → com.microsoft `RotaryEmbedding` over the query, key and value of several
  heads at once, from one projection. The Wqkv rows are permuted so that one matrix product
  gives, per group of heads, [queries | keys | values], with each query and key head in pair
  order: the two halves `rotate_half` pairs up side by side (`pair_order`, `packed_order`). The
  op's interleaved form then rotates a group's queries and keys together as one "head" of
  3 × group × head_dim elements whose first two thirds are rotated (`rotary_embedding_dim`)
  and whose values pass through, with each head's frequencies tiled along the cache; one Split
  cuts the result into q, k and v. Attention reads q·k, which the same permutation of q and k
  leaves unchanged, and v is not permuted. Per layer that is one product, one rotary kernel and
  one split instead of three products and two rotary kernels: fewer launches, which is what a
  pass of few rows pays for, against the values' trip through the rotary kernel, which costs
  more at many rows. ONNX Runtime's rotary kernel runs a thread block per (head, token, row)
  with a thread per element, so the groups are as large as its 1,024-thread limit allows
  (blocks of one 64-element head leave it badly underused);
* `attention` → com.microsoft `MultiHeadAttention` with an additive `attention_bias`
  [B, 1, T, T] that keeps each query to the keys of its own packed row (encoder.segment_bias)
  and, in sliding layers, to the local window;
* `gelu` → com.microsoft `BiasGelu` (exact, erf) with an all-zero bias: traced, `nn.GELU`
  becomes five elementwise kernels that ONNX Runtime's fusion does not recognise in the dynamo
  export, and BiasGelu's kernel is vectorised where the `Gelu` op's is not
  (benchmarks/gpu/layer_ops_probe.py);
* `layer_norm` → com.microsoft `SkipLayerNormalization` with an all-zero skip of [T, D], made
  once a pass: LayerNorm(x + 0) is LayerNorm(x), and ONNX Runtime's skip kernel is vectorised
  where its LayerNormalization kernel is not;
* `add_norm` (a residual add and the pre-norm after it) → the same op with the block's output as
  its input and the residual stream as its skip: it returns the norm and the sum, which carries
  the stream on, so the encoder's residual adds launch nothing of their own. ONNX Runtime's own
  fusion never fires here (the sum has two consumers and the length is dynamic).

The encoder and decision layers call them when exported with `attention="mha"`, which every
checkpoint whose heads the rotary kernel takes gets (`attention_for`); `"sdpa"` traces the
reference maths below instead, the same functions the ops run in torch.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

ATTENTION = ("sdpa", "mha")
ROTARY_BLOCK = 1024  # ONNX Runtime's RotaryEmbedding: one thread per element of a "head", ≤ 1024
# Additive bias of a masked key: exp(-1e4 + logit) is 0 in fp16 and fp32, and it is finite, so
# a row whose every key is masked (a pad query outside every real token's window) stays finite
# and cannot put NaNs into the values real rows read with weight 0.
MASKED = -1.0e4


def attention_for(head_dim: int) -> str:
    """The fused kernels ("mha", fp32 and fp16 alike) where ONNX Runtime's rotary kernel takes
    heads of `head_dim` (packed_group), else the same maths traced ("sdpa")."""
    return "mha" if 3 * head_dim <= ROTARY_BLOCK else "sdpa"


def kernels(mode: str) -> tuple:
    """(attention, exact GELU, LayerNorm, residual add + LayerNorm) for an export mode: the custom
    ops ("mha") or the same maths as plain torch ops ("sdpa"). Defined below; looked up when
    called. The rotary embedding differs in layout too: see encoder.encode."""
    if mode == "mha":
        return attention, gelu, norm, residual_norm
    return attention_reference, gelu_reference, norm_reference, residual_norm_reference


def residual_norm_reference(
    module: torch.nn.Module, h: torch.Tensor, delta: torch.Tensor | None, zeros: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(module(h + delta), h + delta): a block's output added to the residual stream `h`, and the
    pre-norm that reads the new stream. `delta` None: nothing to add yet."""
    h = h if delta is None else h + delta
    return module(h), h


def residual_norm(
    module: torch.nn.Module, h: torch.Tensor, delta: torch.Tensor | None, zeros: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """residual_norm_reference with the add and a LayerNorm in one `add_norm` kernel."""
    if delta is None:
        return norm(module, h, zeros), h
    if not isinstance(module, torch.nn.LayerNorm):
        h = h + delta
        return module(h), h
    return add_norm(delta, h, module.weight, module.bias, module.eps)


def norm_reference(module: torch.nn.Module, x: torch.Tensor, zeros: torch.Tensor) -> torch.Tensor:
    """`module` (a LayerNorm or an Identity) on x; `zeros` [T, D] is only the fused form's skip."""
    return module(x)


def norm(module: torch.nn.Module, x: torch.Tensor, zeros: torch.Tensor) -> torch.Tensor:
    """norm_reference through `layer_norm` where `module` is a LayerNorm."""
    if not isinstance(module, torch.nn.LayerNorm):
        return module(x)
    return layer_norm(x, zeros, module.weight, module.bias, module.eps)


def pair_order(heads: int, head_dim: int) -> list[int]:
    """Output order of a [heads × head_dim] projection in which element j of each head's first
    half is followed by element j of its second half, the pair `rotate_half` rotates together."""
    half = head_dim // 2
    return [h * head_dim + part * half + j for h in range(heads) for j in range(half) for part in (0, 1)]


def packed_group(heads: int, head_dim: int) -> int:
    """How many heads' q, k and v one block of the rotary kernel holds: the most that divide
    `heads` and fit in ROTARY_BLOCK elements (4 for ModernBERT's heads of 64: 768 elements)."""
    if 3 * head_dim > ROTARY_BLOCK:
        raise ValueError(
            "heads of %d dims are too wide for ONNX Runtime's rotary kernel (3 x %d > %d elements): "
            "they take the traced attention (sdpa)" % (head_dim, head_dim, ROTARY_BLOCK)
        )
    return max(g for g in range(1, heads + 1) if heads % g == 0 and 3 * g * head_dim <= ROTARY_BLOCK)


def packed_order(heads: int, head_dim: int) -> list[int]:
    """Output order of the [q | k | v] projection (3 × heads × head_dim rows) for packed_rotary:
    per group of packed_group heads, the group's queries, then its keys (both in pair order),
    then its values as they are."""
    group, d = packed_group(heads, head_dim), heads * head_dim
    paired = pair_order(heads, head_dim)
    width = group * head_dim
    out = []
    for g in range(heads // group):
        span = slice(g * width, (g + 1) * width)
        out += paired[span] + [d + i for i in paired[span]] + list(range(2 * d + g * width, 2 * d + (g + 1) * width))
    return out


def packed_rotary_reference(
    x: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, groups: int, rotated: int
) -> torch.Tensor:
    """x [B, T, W] in packed_order, cut into `groups` blocks of W/groups whose first `rotated`
    elements are rotated in adjacent pairs at each token's position (`positions` [B, T] into
    cos/sin [P, rotated/2]) and the rest pass through. In fp32, then back to x's dtype, like
    rotary_reference."""
    b, t, w = x.shape
    xf = x.float().reshape(b, t, groups, w // groups)
    pairs = xf[..., :rotated].reshape(b, t, groups, rotated // 2, 2)
    c, s = (z.float()[positions][:, :, None, :] for z in (cos, sin))
    first, second = pairs[..., 0], pairs[..., 1]
    turned = torch.stack([first * c - second * s, second * c + first * s], -1).reshape(b, t, groups, rotated)
    return torch.cat([turned, xf[..., rotated:]], -1).to(x.dtype).reshape(b, t, w)


def unpack_qkv(x: torch.Tensor, groups: int) -> list[torch.Tensor]:
    """q, k, v [B, T, W/3] (heads in order) from a packed_order tensor [B, T, W]: one Split."""
    b, t, w = x.shape
    return [part.reshape(b, t, w // 3) for part in x.view(b, t, groups, 3, w // groups // 3).split(1, dim=3)]


def rotary_reference(
    x: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, heads: int
) -> torch.Tensor:
    """x [B, T, H·D] rotated at each token's position (`positions` [B, T] into cos/sin [P, D/2]).
    In fp32, as transformers' ModernBERT does, then back to x's dtype."""
    b, t, hd = x.shape
    d = hd // heads
    xf = x.float().reshape(b, t, heads, d)
    c, s = (torch.cat([z[positions], z[positions]], -1).float()[:, :, None, :] for z in (cos, sin))
    rotated = torch.cat([-xf[..., d // 2 :], xf[..., : d // 2]], -1)
    return (xf * c + rotated * s).to(x.dtype).reshape(b, t, hd)


def attention_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, heads: int, scale: float
) -> torch.Tensor:
    """Bidirectional attention: q, k, v [B, T, H·D], additive bias [B, 1, T, T] → [B, T, H·D]."""
    b, t, hd = q.shape
    q, k, v = (z.reshape(b, t, heads, hd // heads).transpose(1, 2) for z in (q, k, v))
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype), scale=scale)
    return o.transpose(1, 2).reshape(b, t, hd)


@torch.library.custom_op("omni_laya::packed_rotary", mutates_args=())
def packed_rotary(
    x: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, groups: int, rotated: int
) -> torch.Tensor:
    return packed_rotary_reference(x, positions, cos, sin, groups, rotated)


@packed_rotary.register_fake
def _(x, positions, cos, sin, groups, rotated):
    return torch.empty_like(x)


@torch.library.custom_op("omni_laya::attention", mutates_args=())
def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, heads: int, scale: float
) -> torch.Tensor:
    return attention_reference(q, k, v, bias, heads, scale)


@attention.register_fake
def _(q, k, v, bias, heads, scale):
    return torch.empty_like(q)


@torch.library.custom_op("omni_laya::layer_norm", mutates_args=())
def layer_norm(
    x: torch.Tensor, zeros: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float
) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


@layer_norm.register_fake
def _(x, zeros, weight, bias, eps):
    return torch.empty_like(x)


@torch.library.custom_op("omni_laya::add_norm", mutates_args=())
def add_norm(
    delta: torch.Tensor, h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    total = delta + h
    return F.layer_norm(total, (total.shape[-1],), weight, bias, eps), total


@add_norm.register_fake
def _(delta, h, weight, bias, eps):
    return torch.empty_like(delta), torch.empty_like(delta)


def gelu_reference(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Exact GELU of x + bias (`bias` [D]: all zeros where the encoder calls it)."""
    return F.gelu(x + bias)


@torch.library.custom_op("omni_laya::gelu", mutates_args=())
def gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return gelu_reference(x, bias)


@gelu.register_fake
def _(x, bias):
    return torch.empty_like(x)


def translations() -> dict:
    """torch.onnx custom_translation_table entries for the ops above."""
    from onnxscript import opset18 as op

    from models import onnx_ops

    ms, _ = onnx_ops.opsets()

    def rotary_embedding(x, positions, cos, sin, groups, rotated):
        # position_ids [B, T]: each token's position in its own row, which restarts at 0 where a
        # packed row begins. The caches come in x's dtype, cast once per pass (encoder.encode).
        return ms.RotaryEmbedding(x, positions, cos, sin, interleaved=1, num_heads=groups, rotary_embedding_dim=rotated)

    def multi_head_attention(q, k, v, bias, heads, scale):
        return ms.MultiHeadAttention(q, k, v, None, None, op.CastLike(bias, q), num_heads=heads, scale=float(scale))

    def exact_gelu(x, bias):
        return ms.BiasGelu(x, bias)

    # The op's optional outputs (mean, inverse std, sum) that nothing reads are unnamed after the
    # export (models.onnx_ops.unname_unused), so no provider is asked for them.
    def skip_layer_norm(x, zeros, weight, bias, eps):
        return ms.SkipLayerNormalization(x, zeros, weight, bias, epsilon=float(eps), _outputs=4)[0]

    def skip_layer_norm_sum(delta, h, weight, bias, eps):
        y, _mean, _inv_std, total = ms.SkipLayerNormalization(delta, h, weight, bias, epsilon=float(eps), _outputs=4)
        return y, total

    return {
        torch.ops.omni_laya.packed_rotary.default: rotary_embedding,
        torch.ops.omni_laya.layer_norm.default: skip_layer_norm,
        torch.ops.omni_laya.add_norm.default: skip_layer_norm_sum,
        torch.ops.omni_laya.attention.default: multi_head_attention,
        torch.ops.omni_laya.gelu.default: exact_gelu,
    }
