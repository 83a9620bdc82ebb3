"""Clef's joint schema head as one export-friendly torch module (export-time only: needs torch).

Same parameter names and maths as `JointSchemaHead` in Cloudflare's joint_schema_model.py
(models.md §5.3), per record, with its per-record Python loops rewritten as masked matrix
products so `torch.onnx.export(dynamo=True)` keeps tokens, questions and options dynamic (the
upstream head fails there on `GuardOnDataDependentSymNode`):
  * span means are a [spans, T] 0/1 matrix times X, over the span length;
  * each question's routing softmax runs over its own options by masking a [q, o] score matrix;
  * per-option lookups of their question's vectors are gathers by `option_question`.
Everything computes in fp32 (weights are published in BF16). Inputs may be right-padded to any
T ≥ n: positions ≥ n (n = the count of token_positions ≥ 0: its length, or fewer where it is
right-padded with -1) are zeroed, masked out of the cross-attention memory, never fall in a span,
and g is X[n−1], the last REAL token; so padding changes nothing. Several records may run side by
side ([B,T,...] inputs, `question_record` naming each question's record): every span, mean and
attention then stays inside its own record, and the positions and records are built without
arithmetic between the input's sizes and data, which ONNX Runtime would run on the CPU and which
would keep it from capturing the graph as CUDA graphs (models/placement.py).

    ClefJointHead(hidden_size, width, routing_layers, layers, heads, feedforward, dropout=0.0)
      .forward(hidden [B,T,H], lexical [B,T,H], token_positions [n or T] or [B,T], question_spans [q,2],
               question_types [q], option_spans [o,2], option_question [o], question_record [q] = None)
               -> logits f32 [o]
      (`lexical` = lm_head rows of the input ids; only rows inside option spans are read)
    ClefHeadGraph(head, lm_head_weight)
      .forward(hidden [1,T,H], input_ids [1,T], token_positions, question_spans, question_types,
               option_spans, option_question) -> logits f32 [o]      # gathers `lexical` itself
    ClefJointGraph(backbone, head_graph)          # the clef-joint-v1 signature (§5.5), or with records
      .forward(input_ids [B,T], token_positions, question_spans, question_types, option_spans,
               option_question, question_record=None) -> logits f32 [o]; `backbone(input_ids) -> hidden [B,T,H]`
    load_head(head_dir) -> ClefJointHead                  # joint_head_config.json + .safetensors
    load_lm_head(checkpoint_dir) -> torch.Tensor          # lm_head.weight, as stored (BF16)
    load_head_graph(checkpoint_dir) -> ClefHeadGraph
    compose(backbone, checkpoint_dir) -> ClefJointGraph
    export_head(head_dir, out_path) -> dict               # standalone ClefHeadGraph ONNX, checked
"""

from __future__ import annotations

import json
import math
import os

import torch
import torch.nn.functional as F
from torch import nn

HEAD_CONFIG = "joint_head_config.json"
HEAD_WEIGHTS = "joint_head.safetensors"
HEAD_INPUTS = [
    "hidden",
    "input_ids",
    "token_positions",
    "question_spans",
    "question_types",
    "option_spans",
    "option_question",
]
OPSET = 18
_LN100 = math.log(100.0)


class _Attention(nn.Module):
    """`nn.MultiheadAttention`'s parameters (packed in-projection, biased) on unbatched [L, W]."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * width, width))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * width))
        self.out_proj = nn.Linear(width, width)
        nn.init.xavier_uniform_(self.in_proj_weight)

    def forward(self, query, key_value, keep=None):
        """`keep` bool, [S] or [L, S]: which keys may be attended (by each query; None: all)."""
        wq, wk, wv = self.in_proj_weight.chunk(3)
        bq, bk, bv = self.in_proj_bias.chunk(3)
        d = query.shape[-1] // self.heads
        q, k, v = (
            F.linear(x, w, b).unflatten(-1, (self.heads, d)).transpose(0, 1)
            for x, w, b in ((query, wq, bq), (key_value, wk, bk), (key_value, wv, bv))
        )
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)  # [heads, L, S]
        if keep is not None:
            scores = scores.masked_fill(~keep, float("-inf"))
        out = torch.matmul(torch.softmax(scores, dim=-1), v)  # [heads, L, d]
        return self.out_proj(out.transpose(0, 1).flatten(-2))


def _feedforward(width: int, inner: int) -> nn.Sequential:
    # Indices 0 and 3 hold the weights, as upstream's Linear, GELU, Dropout, Linear(, Dropout).
    return nn.Sequential(nn.Linear(width, inner), nn.GELU(), nn.Identity(), nn.Linear(inner, width))


class _RoutingLayer(nn.Module):
    """`EvidenceRoutingLayer`: option queries read the (normed) memory, then a feed-forward."""

    def __init__(self, width: int, heads: int, feedforward: int):
        super().__init__()
        self.query_norm = nn.LayerNorm(width)
        self.memory_norm = nn.LayerNorm(width)
        self.attention = _Attention(width, heads)
        self.feedforward_norm = nn.LayerNorm(width)
        self.feedforward = _feedforward(width, feedforward)

    def forward(self, queries, memory, keep):
        queries = queries + self.attention(self.query_norm(queries), self.memory_norm(memory), keep)
        return queries + self.feedforward(self.feedforward_norm(queries))


class _DecoderLayer(nn.Module):
    """`TransformerDecoderLayer(norm_first=True, activation="gelu")` in eval mode, no masks but the
    memory's padding."""

    def __init__(self, width: int, heads: int, feedforward: int):
        super().__init__()
        self.self_attn = _Attention(width, heads)
        self.multihead_attn = _Attention(width, heads)
        self.linear1 = nn.Linear(width, feedforward)
        self.linear2 = nn.Linear(feedforward, width)
        self.norm1 = nn.LayerNorm(width)
        self.norm2 = nn.LayerNorm(width)
        self.norm3 = nn.LayerNorm(width)

    def forward(self, fields, memory, keep, same=None):
        """`same` [q, q]: which fields may read each other (those of one record; None: all)."""
        x = self.norm1(fields)
        fields = fields + self.self_attn(x, x, same)
        fields = fields + self.multihead_attn(self.norm2(fields), memory, keep)
        return fields + self.linear2(F.gelu(self.linear1(self.norm3(fields))))


def _squared_norm(x):
    """Σx² over the last axis, kept: a product and a ReduceSum once exported. F.normalize and
    F.cosine_similarity export as ReduceL2, which ONNX Runtime's CUDA provider hands to a slow
    cuDNN reduction (ReduceSum has its own kernel)."""
    return (x * x).sum(-1, keepdim=True)


def _normalize(x, eps: float = 1e-12):
    """F.normalize(x, dim=-1): x / max(‖x‖, eps)."""
    return x / _squared_norm(x).sqrt().clamp_min(eps)


def _cosine(a, b, eps: float = 1e-8):
    """F.cosine_similarity(a, b, dim=-1): a·b / sqrt(max(‖a‖²‖b‖², eps²)), as torch computes it."""
    return (a * b).sum(-1) / (_squared_norm(a) * _squared_norm(b)).clamp_min(eps * eps).sqrt().squeeze(-1)


def _span_means(values, spans, positions, record, span_record):
    """Mean of values[start:end] per span: a [spans, B·T] 0/1 matrix times values, over the length.
    `positions`: each row's place in its record; `record`, `span_record`: each row's and each
    span's record (records side by side)."""
    inside = (
        (positions[None, :] >= spans[:, :1])
        & (positions[None, :] < spans[:, 1:])
        & (record[None, :] == span_record[:, None])
    ).to(values.dtype)
    return torch.matmul(inside, values) / inside.sum(dim=-1, keepdim=True)


class ClefJointHead(nn.Module):
    def __init__(
        self,
        hidden_size: int,
        width: int,
        routing_layers: int,
        layers: int,
        heads: int,
        feedforward: int,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.hidden_norm = nn.LayerNorm(hidden_size)
        self.memory_projection = nn.Linear(hidden_size, width, bias=False)
        self.question_projection = nn.Linear(hidden_size, width, bias=False)
        self.option_question_projection = nn.Linear(hidden_size, width, bias=False)
        self.global_projection = nn.Linear(hidden_size, width, bias=False)
        self.option_context_projection = nn.Linear(hidden_size, width, bias=False)
        self.option_lexical_projection = nn.Linear(hidden_size, width, bias=False)
        self.type_embedding = nn.Embedding(3, width)
        self.evidence_layers = nn.ModuleList(_RoutingLayer(width, heads, feedforward) for _ in range(routing_layers))
        self.option_summary_norm = nn.LayerNorm(width)
        self.layers = nn.ModuleList(_DecoderLayer(width, heads, feedforward) for _ in range(layers))
        self.field_norm = nn.LayerNorm(width)
        self.option_norm = nn.LayerNorm(width)
        self.residual_scorer = nn.Sequential(nn.Linear(4 * width, width), nn.GELU(), nn.Identity(), nn.Linear(width, 1))
        self.prior_logit_scale = nn.Parameter(torch.zeros(()))
        self.joint_logit_scale = nn.Parameter(torch.zeros(()))
        self.residual_gate = nn.Parameter(torch.zeros(()))

    def forward(
        self,
        hidden,
        lexical,
        token_positions,
        question_spans,
        question_types,
        option_spans,
        option_question,
        question_record=None,
    ):
        """One record ([1, T, H] hidden, positions [n or T]) or several side by side ([B, T, H],
        positions [B, T], `question_record` [q]: each question's record; spans within a record).
        The records run as one sequence of B·T positions in which every span, mean and attention
        stays inside its own record: each record's logits are those it gets alone."""
        batch, width = hidden.shape[0], hidden.shape[1]
        if token_positions.dim() == 1:
            token_positions = token_positions[None]
        if question_record is None:
            question_record = torch.zeros_like(question_types)
        option_record = question_record[option_question]
        # n from the values, not the length: positions padded with -1 give the same n, so records
        # padded to one bucketed shape share one CUDA graph (served.py).
        n = (token_positions >= 0).sum(-1)  # [B]
        # Each flat position's place in its record and its record, by Range, Expand and Reshape
        # alone: arithmetic between the shape's sizes and data would run on the CPU in ONNX
        # Runtime, and a graph with compute there cannot be captured as a CUDA graph.
        local = torch.arange(width, device=hidden.device)
        rows = torch.arange(batch, device=hidden.device)
        positions = local[None, :].expand(batch, width).reshape(-1)  # [B·T]
        record = rows[:, None].expand(batch, width).reshape(-1)  # [B·T]
        keep = (local[None, :] < n[:, None]).reshape(-1)  # real tokens
        # Zero the pads first: a weight of 0 times a non-finite pad state would still be NaN.
        x = self.hidden_norm(torch.where(keep[:, None], hidden.reshape(batch * width, -1).float(), 0.0))
        memory = self.memory_projection(x)  # [B·T, W]
        last = (local[None, :] == (n - 1)[:, None]).float()  # [B, T], one-hot
        g = torch.matmul(last[:, None, :], x.reshape(batch, width, -1))[:, 0]  # each last real token
        question_vectors = _span_means(x, question_spans, positions, record, question_record)  # [q, H]
        contexts = _span_means(x, option_spans, positions, record, option_record)  # [o, H]
        lexical = _span_means(
            lexical.reshape(batch * width, -1).float(), option_spans, positions, record, option_record
        )  # [o, H]
        option_keep = keep[None, :] & (record[None, :] == option_record[:, None])  # [o, B·T]
        question_keep = keep[None, :] & (record[None, :] == question_record[:, None])  # [q, B·T]

        routed = (
            self.option_context_projection(contexts)
            + self.option_lexical_projection(lexical)
            + self.option_question_projection(question_vectors)[option_question]
        )
        for layer in self.evidence_layers:
            routed = layer(routed, memory, option_keep)  # [o, W]

        base = self.question_projection(question_vectors)  # [q, W]
        own = option_question[None, :] == torch.arange(base.shape[0], device=x.device)[:, None]
        scores = torch.matmul(base, routed.transpose(0, 1)) / math.sqrt(routed.shape[-1])
        weights = torch.softmax(scores.masked_fill(~own, float("-inf")), dim=-1)  # [q, o]
        fields = (
            base
            + self.option_summary_norm(torch.matmul(weights, routed))
            + self.global_projection(g)[question_record]
            + self.type_embedding(question_types)
        )
        same = question_record[:, None] == question_record[None, :]
        for layer in self.layers:
            fields = layer(fields, memory, question_keep, same)
        fields = self.field_norm(fields)[option_question]  # [o, W], per option

        anchor = _normalize(question_vectors + g[question_record])[option_question]
        prior = self.prior_logit_scale.clamp(max=_LN100).exp() * (_normalize(lexical) * anchor).sum(-1)
        options = self.option_norm(routed)
        cosine = _cosine(fields, options)
        features = torch.cat([fields, options, fields * options, torch.abs(fields - options)], dim=-1)
        residual = self.residual_scorer(features).squeeze(-1)
        joint = self.joint_logit_scale.clamp(max=_LN100).exp() * cosine + residual
        return prior + torch.sigmoid(self.residual_gate) * joint


class ClefHeadGraph(nn.Module):
    """The head plus the `lm_head` rows it reads, kept in their stored dtype and cast after the gather."""

    def __init__(self, head: ClefJointHead, lm_head_weight: torch.Tensor):
        super().__init__()
        self.head = head
        self.register_buffer("lm_head", lm_head_weight)

    def forward(
        self,
        hidden,
        input_ids,
        token_positions,
        question_spans,
        question_types,
        option_spans,
        option_question,
        question_record=None,
    ):
        lexical = F.embedding(input_ids, self.lm_head).float()
        return self.head(
            hidden,
            lexical,
            token_positions,
            question_spans,
            question_types,
            option_spans,
            option_question,
            question_record,
        )


class ClefJointGraph(nn.Module):
    """clef-joint-v1 (§5.5): a backbone that maps input_ids [1,T] to final-norm hidden [1,T,H]
    (causal, right-padded: pads never reach real positions), then the head."""

    def __init__(self, backbone: nn.Module, head_graph: ClefHeadGraph):
        super().__init__()
        self.backbone = backbone
        self.head_graph = head_graph

    def forward(
        self,
        input_ids,
        token_positions,
        question_spans,
        question_types,
        option_spans,
        option_question,
        question_record=None,
    ):
        hidden = self.backbone(input_ids)
        # A backbone with a baked prompt head (qwen35.graph.Backbone.full_ids) takes the ids after
        # it and returns every position, the head's included; the head reads the whole record's ids.
        full_ids = getattr(self.backbone, "full_ids", None)
        return self.head_graph(
            hidden,
            input_ids if full_ids is None else full_ids(input_ids),
            token_positions,
            question_spans,
            question_types,
            option_spans,
            option_question,
            question_record,
        )


def load_head(head_dir: str) -> ClefJointHead:
    """The published head (BF16 weights) in fp32, eval mode; strict: every upstream key, no other."""
    from safetensors.torch import load_file

    with open(os.path.join(head_dir, HEAD_CONFIG), encoding="utf-8") as f:
        config = json.load(f)
    head = ClefJointHead(**config)
    weights = {k: v.to(torch.float32) for k, v in load_file(os.path.join(head_dir, HEAD_WEIGHTS)).items()}
    head.load_state_dict(weights, strict=True)
    return head.eval()


def load_lm_head(checkpoint_dir: str) -> torch.Tensor:
    """`lm_head.weight` [V, H] as stored (the embeddings when tied), from one file or the shards."""
    from models.qwen35 import weights

    head = weights.first_tensor(
        checkpoint_dir, ("lm_head.weight", "model.language_model.embed_tokens.weight", "model.embed_tokens.weight")
    )
    if head is None:
        raise ValueError("no lm_head or embedding weight in %s" % checkpoint_dir)
    return head


def load_head_graph(checkpoint_dir: str) -> ClefHeadGraph:
    return ClefHeadGraph(load_head(checkpoint_dir), load_lm_head(checkpoint_dir)).eval()


def compose(backbone: nn.Module, checkpoint_dir: str) -> ClefJointGraph:
    return ClefJointGraph(backbone, load_head_graph(checkpoint_dir)).eval()


def example_inputs(
    hidden_size: int, vocab: int, seq: int = 128, tokens: int = 100, options_per_question=(2, 3, 4), seed: int = 0
):
    """A valid record (spans inside the real tokens, each question its options) for tracing and
    checks; not 0/1-sized anywhere, so the exporter specialises no dimension."""
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(1, seq, hidden_size, generator=g)
    input_ids = torch.randint(0, vocab, (1, seq), generator=g)
    q_spans, o_spans, o_question, at = [], [], [], 4
    for qi, count in enumerate(options_per_question):
        q_spans.append((at, at + 3 + qi))
        at += 5 + qi
        for j in range(count):
            o_spans.append((at, at + 2 + j % 3))
            o_question.append(qi)
            at += 4
    if at >= tokens:
        raise ValueError("%d tokens do not hold this record (needs %d)" % (tokens, at + 1))
    as_long = lambda v: torch.tensor(v, dtype=torch.int64)  # noqa: E731
    return (
        hidden,
        input_ids,
        torch.arange(tokens),
        as_long(q_spans),
        as_long([qi % 3 for qi in range(len(options_per_question))]),
        as_long(o_spans),
        as_long(o_question),
    )


def export_head(head_dir: str, out_path: str) -> dict:
    """Write the standalone `ClefHeadGraph` ONNX (inputs HEAD_INPUTS, output `logits`) and check
    ONNX Runtime against torch on shapes it was not traced at, padded and not."""
    graph = load_head_graph(head_dir)
    hidden_size, vocab = graph.head.hidden_norm.normalized_shape[0], graph.lm_head.shape[0]
    seq, tokens, questions, options = (
        torch.export.Dim("seq"),
        torch.export.Dim("tokens"),
        torch.export.Dim("questions"),
        torch.export.Dim("options"),
    )
    dynamic = {
        "hidden": {1: seq},
        "input_ids": {1: seq},
        "token_positions": {0: tokens},
        "question_spans": {0: questions},
        "question_types": {0: questions},
        "option_spans": {0: options},
        "option_question": {0: options},
    }
    with torch.no_grad():
        program = torch.onnx.export(
            graph,
            example_inputs(hidden_size, vocab),
            input_names=HEAD_INPUTS,
            output_names=["logits"],
            dynamic_shapes=dynamic,
            dynamo=True,
            opset_version=OPSET,
            external_data=True,
            verbose=False,
        )
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    program.save(out_path, external_data=True)
    return {
        "onnx": out_path,
        "inputs": HEAD_INPUTS,
        "outputs": ["logits"],
        "opset": OPSET,
        "max_abs_logit_diff": _check(graph, out_path, hidden_size, vocab),
    }


def _check(graph: ClefHeadGraph, onnx_path: str, hidden_size: int, vocab: int) -> float:
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    worst = 0.0
    for seq, tokens, per_question in ((64, 64, (2,)), (192, 130, (5, 2, 3, 2)), (40, 33, (1, 3))):
        feeds = example_inputs(hidden_size, vocab, seq, tokens, per_question, seed=seq)
        with torch.no_grad():
            ref = graph(*feeds).numpy()
        got = session.run(None, dict(zip(HEAD_INPUTS, (t.numpy() for t in feeds), strict=True)))[0]
        worst = max(worst, float(np.abs(ref - got).max()))
    if not worst < 1e-4:
        raise RuntimeError("exported head disagrees with torch: max |Δlogit| = %g" % worst)
    return worst
