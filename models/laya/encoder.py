"""ModernBERT's forward pass written out over transformers' module (export-time only: needs torch).

The weights, their names and the maths are transformers' `ModernBertModel` (eval mode, padded
batches), over batch rows that may each hold several rows packed side by side (`segment_bias`,
positions that restart where a row begins): embeddings → LayerNorm, then per layer a pre-norm
attention with rotary positions (global layers at `global_rope_theta` over the whole sequence, sliding layers at
`local_rope_theta` within ±local_attention/2 tokens) and a pre-norm GeGLU MLP, then the final
norm. Writing it out lets the export emit one kernel per rotary, attention, GELU and residual
add with the norm after it (`fused.py`), and build the two attention masks once per pass instead
of once per layer; it also keeps the exported graph independent of how a transformers release
dispatches attention. The packed projections (Wqkv, the MLP's Wi) run as one matrix product per
output instead of one product and a split (models/projections.py).
"""

from __future__ import annotations

import torch
from torch import nn

from models.laya import fused
from models.projections import rows

LAYER_TYPES = ("full_attention", "sliding_attention")


def _thetas(config) -> dict:
    params = getattr(config, "rope_parameters", None)
    if params:
        for kind in LAYER_TYPES:
            if params[kind].get("rope_type", "default") != "default":
                raise ValueError("ModernBERT rope_type %r is not supported" % params[kind]["rope_type"])
        return {kind: float(params[kind]["rope_theta"]) for kind in LAYER_TYPES}
    glob = float(config.global_rope_theta)
    return {"full_attention": glob, "sliding_attention": float(getattr(config, "local_rope_theta", None) or glob)}


def layer_types(config) -> list[str]:
    types = getattr(config, "layer_types", None)
    if types:
        return list(types)
    every = config.global_attn_every_n_layers
    return ["sliding_attention" if i % every else "full_attention" for i in range(config.num_hidden_layers)]


class RotaryCaches(nn.Module):
    """cos/sin of position × inverse frequency, [max_position_embeddings, head_dim/2] per layer
    type, computed as transformers does (fp32 products). Not persistent: they are derived from
    the config, not read from checkpoints."""

    def __init__(self, config):
        super().__init__()
        d = config.hidden_size // config.num_attention_heads
        positions = torch.arange(config.max_position_embeddings, dtype=torch.float32)[:, None]
        for kind, theta in _thetas(config).items():
            inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
            freqs = positions * inv_freq[None, :]
            self.register_buffer(kind + "_cos", freqs.cos(), persistent=False)
            self.register_buffer(kind + "_sin", freqs.sin(), persistent=False)

    def get(self, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
        return getattr(self, kind + "_cos"), getattr(self, kind + "_sin")


def segment_bias(segments: torch.Tensor, dtype) -> torch.Tensor:
    """[B, T] segment numbers (0: padding, 1, 2, …: the rows packed into a batch row) → additive
    [B, 1, T, T]: a query attends only to the keys of its own row, so rows packed side by side
    are computed as if each were alone; pad queries attend to nothing (every bias MASKED, still
    finite). A 1/0 attention mask is the one-row-a-batch-row case."""
    same = (segments[:, :, None] == segments[:, None, :]) & (segments[:, None, :] > 0)
    return torch.where(same, 0.0, fused.MASKED).to(dtype)[:, None, :, :]


def window_bias(t: int, half_window: int, device) -> torch.Tensor:
    """[T, T] additive band: keys more than `half_window` tokens away are masked."""
    pos = torch.arange(t, device=device)
    far = (pos[:, None] - pos[None, :]).abs() > half_window
    return torch.where(far, fused.MASKED, 0.0)


def encode(
    encoder,
    caches: RotaryCaches,
    input_ids: torch.Tensor,
    positions: torch.Tensor,
    padding: torch.Tensor,
    attention: str,
) -> torch.Tensor:
    """last_hidden_state of `encoder` (a transformers ModernBertModel) for a batch of packed rows:
    `positions` [B, T] is each token's position in its own row, `padding` is
    segment_bias(segments, torch.float32), which the caller reuses. The sliding window is
    measured in batch columns, which within one row are its positions' distances."""
    config = encoder.config
    heads = config.num_attention_heads
    head_dim = config.hidden_size // heads
    scale = head_dim**-0.5
    attend, gelu, norm, residual = fused.kernels(attention)
    embedded = encoder.embeddings.tok_embeddings(input_ids)
    zeros = embedded.new_zeros(input_ids.shape[1], config.hidden_size)  # the fused norms' skip
    h = norm(encoder.embeddings.norm, embedded, zeros)
    biases = {
        "full_attention": padding.to(h.dtype),
        "sliding_attention": (
            padding + window_bias(input_ids.shape[1], config.local_attention // 2, input_ids.device)
        ).to(h.dtype),
    }
    types = layer_types(config)
    d, inner = config.hidden_size, config.intermediate_size
    if attention == "mha":
        # One product gives q, k and v packed by groups of heads, rotated by one kernel and cut by
        # one split (fused.packed_rotary); the tiled caches (a group's q then k frequencies) are
        # cast once here, so the graph holds one folded table per layer type.
        group = fused.packed_group(heads, head_dim)
        order = torch.tensor(fused.packed_order(heads, head_dim), device=input_ids.device)
        tables = {kind: tuple(z.repeat(1, 2 * group).to(h.dtype) for z in caches.get(kind)) for kind in set(types)}

        def project(layer, x, kind):
            qkv = rows(layer.attn.Wqkv, x, 0, 3 * d, order)
            qkv = fused.packed_rotary(qkv, positions, *tables[kind], heads // group, 2 * group * head_dim)
            return fused.unpack_qkv(qkv, heads // group)
    else:

        def project(layer, x, kind):
            cos, sin = caches.get(kind)
            q, k = (
                fused.rotary_reference(rows(layer.attn.Wqkv, x, i * d, (i + 1) * d), positions, cos, sin, heads)
                for i in range(2)
            )
            return q, k, rows(layer.attn.Wqkv, x, 2 * d, 3 * d)

    exact_gelu = getattr(config, "hidden_activation", None) == "gelu"
    no_bias = h.new_zeros(inner)  # exact GELU runs as GELU(x + 0): fused.gelu
    delta = None  # the last MLP's output, added to the stream by the next norm's kernel
    for layer, kind in zip(encoder.layers, types, strict=True):
        x, h = residual(layer.attn_norm, h, delta, zeros)
        o = attend(*project(layer, x, kind), biases[kind], heads, scale)
        x, h = residual(layer.mlp_norm, h, layer.attn.Wo(o), zeros)
        gate = rows(layer.mlp.Wi, x, 0, inner)
        act = gelu(gate, no_bias) if exact_gelu else layer.mlp.act(gate)
        delta = layer.mlp.Wo(act * rows(layer.mlp.Wi, x, inner, 2 * inner))
    return residual(encoder.final_norm, h, delta, zeros)[0]
