"""Laya's `DecisionModel` as one export-friendly torch module (export-time only: needs torch).

Same parameter names and maths as laya 0.4.15's `DecisionModel` in its sequential option layout
(models.md §2.3): ModernBERT encoder, question-type embedding, two pre-LN encoder layers with
ReLU and key-padding masks, the marker scorer and the act head fed by features of the untempered
option distribution. The head layers are written out instead of `nn.TransformerEncoderLayer`,
whose fused fast path and traced reshapes do not export with dynamic shapes.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from models.laya import fused
from models.laya.adapter import MASKED_LOGIT
from models.laya.encoder import RotaryCaches, encode, segment_bias


class _HeadAttention(nn.Module):
    """`nn.MultiheadAttention`'s parameters (packed in-projection, biased) for self-attention."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * d, d))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * d))
        self.out_proj = nn.Linear(d, d)
        nn.init.xavier_uniform_(self.in_proj_weight)

    def forward(self, x: torch.Tensor, bias: torch.Tensor, attend) -> torch.Tensor:
        d = x.shape[-1]
        q, k, v = F.linear(x, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1)
        return self.out_proj(attend(q, k, v, bias, self.heads, (d // self.heads) ** -0.5))


class _HeadLayer(nn.Module):
    """`TransformerEncoderLayer(d, d//64, 4d, norm_first=True, activation=relu)` in eval mode."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.self_attn = _HeadAttention(d, heads)
        self.linear1 = nn.Linear(d, 4 * d)
        self.linear2 = nn.Linear(4 * d, d)
        self.norm1 = nn.LayerNorm(d)
        self.norm2 = nn.LayerNorm(d)

    def forward(
        self, x: torch.Tensor, bias: torch.Tensor, attend, norm=fused.norm_reference, zeros: torch.Tensor | None = None
    ) -> torch.Tensor:
        x = x + self.self_attn(norm(self.norm1, x, zeros), bias, attend)
        return x + self.linear2(F.relu(self.linear1(norm(self.norm2, x, zeros))))


class _Head(nn.Module):
    def __init__(self, d: int, layers: int):
        super().__init__()
        self.layers = nn.ModuleList(_HeadLayer(d, max(1, d // 64)) for _ in range(layers))


class LayaDecisionGraph(nn.Module):
    """input_ids, segments, positions, qtype [B, T]; starts [R]; marker_pos, marker_mask [R, K]
    -> logits [R, K], act_logits [R, n_act], for R question rows packed into B batch rows of T
    tokens (models/laya/adapter.py): `segments` numbers the rows within each batch row (0:
    padding), `positions` counts each row's tokens from 0, `qtype` is each token's question
    type, `starts` and `marker_pos` index a row's first token and its option markers in the
    batch flattened to B·T tokens. Attention never crosses rows, so a row's answers are those it
    gets alone.

    `attention`: "mha" runs rotary and attention through the custom ops that export to single
    ONNX Runtime kernels, "sdpa" through the same maths as plain torch ops; by default the one the
    encoder's heads allow (fused.attention_for)."""

    def __init__(self, encoder: nn.Module, head_layers: int = 2, n_act: int = 2, attention: str | None = None):
        super().__init__()
        d = encoder.config.hidden_size
        attention = attention or fused.attention_for(d // encoder.config.num_attention_heads)
        if attention not in fused.ATTENTION:
            raise ValueError("unknown attention %r (known: %s)" % (attention, ", ".join(fused.ATTENTION)))
        self.attention = attention
        self.encoder = encoder
        self.rotary = RotaryCaches(encoder.config)
        self.head = _Head(d, head_layers)
        self.type_emb = nn.Embedding(3, d)
        self.scorer = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.GELU(), nn.Linear(d, 1))
        self.act_head = nn.Sequential(nn.Linear(d + 4, 256), nn.GELU(), nn.Linear(256, n_act))
        # Laya stores (and ignores) a temperature buffer in its weights; calibration is host-side.
        self.register_buffer("temperature", torch.ones(3))

    def forward(self, input_ids, segments, positions, qtype, starts, marker_pos, marker_mask):
        padding = segment_bias(segments, torch.float32)  # one mask for encoder and head
        h = encode(self.encoder, self.rotary, input_ids, positions, padding, self.attention)
        h = h + self.type_emb(qtype)
        attend, _, norm, _ = fused.kernels(self.attention)
        bias, zeros = padding.to(h.dtype), h.new_zeros(h.shape[1], h.shape[2])
        for layer in self.head.layers:
            h = layer(h, bias, attend, norm, zeros)
        # The scorer and act head stay fp32 in a half-precision export (half_precision): they are
        # tiny, and the option logits are what calibration and the answers read.
        flat = h.float().reshape(-1, h.shape[-1])
        logits = self.scorer(flat[marker_pos.clamp(min=0)]).squeeze(-1).float()
        logits = logits.masked_fill(~marker_mask, MASKED_LOGIT)
        # Act features from the untempered distribution; callers feed >= 2 marker columns.
        p = torch.softmax(logits, -1)
        k = marker_mask.sum(-1).clamp(min=2).float()
        ent = -(p * torch.log(p.clamp_min(1e-9))).sum(-1) / torch.log(k)
        top2 = p.topk(2, -1).values
        feats = torch.stack([top2[:, 0], top2[:, 0] - top2[:, 1], ent, k / 255.0], -1)
        act_logits = self.act_head(torch.cat([flat[starts], feats], -1))
        return logits, act_logits


def half_precision(model: LayaDecisionGraph, dtype) -> LayaDecisionGraph:
    """Encoder, question-type embedding and decision layers in `dtype`; the scorer and act head
    stay fp32 (forward casts the hidden states up before them), and so do the rotary caches
    (encoder.encode casts them to the activations' dtype, once a pass)."""
    for part in (model.encoder, model.head, model.type_emb):
        part.to(dtype)
    return model


def build_encoder(encoder_config: dict):
    """A ModernBERT encoder from its `config.json` dict, uninitialised (weights come next)."""
    from transformers import ModernBertConfig, ModernBertModel

    # from_dict maps the transformers-4 keys of published configs (global_rope_theta, ...).
    config = ModernBertConfig.from_dict(dict(encoder_config))
    config._attn_implementation = "sdpa"
    config.reference_compile = False
    return ModernBertModel(config)


def scale_like_trained(model: LayaDecisionGraph, seed: int) -> None:
    """Random weights whose option logits spread like a trained model's (std ~2, not ~0.02)."""
    g = torch.Generator().manual_seed(seed)
    d = model.scorer[1].in_features
    with torch.no_grad():
        # HF's std-0.02 init leaves every [MASK] marker with the same hidden state; unit-variance
        # projections let attention and RoPE tell the markers apart, as training does.
        for module in list(model.encoder.modules()) + list(model.head.modules()):
            if isinstance(module, nn.Linear):
                module.weight.normal_(0.0, 1.0 / math.sqrt(module.in_features), generator=g)
            elif isinstance(module, _HeadAttention):
                module.in_proj_weight.normal_(0.0, 1.5 / math.sqrt(module.in_proj_weight.shape[1]), generator=g)
        model.scorer[1].weight.normal_(0.0, 1.0 / math.sqrt(d), generator=g)
        model.scorer[3].weight.normal_(0.0, 8.0 / math.sqrt(d), generator=g)
        model.type_emb.weight.normal_(0.0, 0.5, generator=g)
        model.act_head[2].weight.normal_(0.0, 1.0 / math.sqrt(256), generator=g)
