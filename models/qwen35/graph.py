"""The Qwen3.5 text stack as a torch module built for export: one prefill, no cache, no mask.

Written from models.md §6.2 (transformers `qwen3_5` maths) with the same parameter names as
`Qwen3_5TextModel`, so its state dict loads unchanged. Rows are right-padded: causality alone
keeps trailing pads out of every real position, in attention and in the GDN recurrence, so no
attention mask is needed and padding never changes a real row. The GDN recurrence is the
`gated_delta` custom op (gdn.py); everything else is standard ops.

A fixed prompt head (Cua-S1's system turn; Clef-Flash's system turn and STATE: line) can be
baked in (`Backbone.set_prefix`, prefix.py): each GDN layer then starts from the head's conv
inputs and recurrent state, and each attention layer reads the head's keys and values before the
row's own, so a row holds only the tokens after the head and its positions start at the head's
length.

Readouts (what the decision models read, §6.4):
* "last": `hidden [B, H]`, the final-norm hidden state at `positions[b]` (last real token);
* "letters": `hidden` plus `letter_logits [B, n]` = hidden · embed[letter_ids]ᵀ (Cua-S1);
* "all": `hidden_states [B, T, H]`, every position (Clef-Flash's joint head reads them all;
  a baked head's positions included, from constants).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from models.projections import parts, rows
from models.qwen35 import fused
from models.qwen35.dims import TextDims
from models.qwen35.gdn import (
    causal_conv_silu,
    gated_delta,
    gated_delta_fused,
    gated_delta_fused_state,
    gated_delta_state,
    gates,
    recurrence,
    split_qkv,
)


def _last(x: torch.Tensor, n: int) -> torch.Tensor:
    """The last n positions of x [B, T, C], zeros ahead of it when T < n (the conv's own padding)."""
    return torch.cat([x.new_zeros(x.shape[0], n, x.shape[2]), x], 1)[:, -n:]


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, offset: float) -> torch.Tensor:
    """y = x·rsqrt(mean x² + eps)·(offset + w), statistics in fp32 (offset 1: zero-centred norms);
    one fused kernel once exported (fused.py)."""
    return fused.rms_norm(x, offset + weight.float(), eps)


def _merged(*linears: nn.Linear) -> nn.Linear:
    """One bias-free Linear whose weight is the given ones' stacked (read part by part)."""
    weight = torch.cat([m.weight.detach() for m in linears], 0)
    merged = nn.Linear(weight.shape[1], weight.shape[0], bias=False, device="meta")  # no init
    merged.weight = nn.Parameter(weight, requires_grad=False)
    return merged


class Norm(nn.Module):
    def __init__(self, dim: int, eps: float, offset: float = 1.0):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))
        self.eps, self.offset = eps, offset

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps, self.offset)


class MLP(nn.Module):
    def __init__(self, d: TextDims):
        super().__init__()
        self.gate_proj = nn.Linear(d.hidden_size, d.intermediate_size, bias=False)
        self.up_proj = nn.Linear(d.hidden_size, d.intermediate_size, bias=False)
        self.down_proj = nn.Linear(d.intermediate_size, d.hidden_size, bias=False)

    def merge_projections(self) -> None:
        self.sizes = [self.gate_proj.out_features, self.up_proj.out_features]
        self.gate_up_proj = _merged(self.gate_proj, self.up_proj)
        del self.gate_proj, self.up_proj

    def forward(self, x):
        gate, up = parts(self.gate_up_proj, x, self.sizes)
        return self.down_proj(F.silu(gate) * up)


class GatedDeltaNet(nn.Module):
    def __init__(self, d: TextDims):
        super().__init__()
        self.d = d
        conv_dim = 2 * d.key_dim + d.value_dim
        self.in_proj_qkv = nn.Linear(d.hidden_size, conv_dim, bias=False)
        self.in_proj_z = nn.Linear(d.hidden_size, d.value_dim, bias=False)
        self.in_proj_b = nn.Linear(d.hidden_size, d.linear_num_value_heads, bias=False)
        self.in_proj_a = nn.Linear(d.hidden_size, d.linear_num_value_heads, bias=False)
        self.conv1d = nn.Conv1d(
            conv_dim,
            conv_dim,
            d.linear_conv_kernel_dim,
            groups=conv_dim,
            bias=False,
            padding=d.linear_conv_kernel_dim - 1,
        )
        self.dt_bias = nn.Parameter(torch.ones(d.linear_num_value_heads))
        self.A_log = nn.Parameter(torch.zeros(d.linear_num_value_heads))
        self.norm = Norm(d.linear_value_head_dim, d.rms_norm_eps, offset=0.0)  # plain w, no +1
        self.out_proj = nn.Linear(d.value_dim, d.hidden_size, bias=False)
        self.fused = False  # one `gated_delta_fused` op from the conv output on (export_program)
        self.gdn_dtype = None  # a dtype the recurrence's inputs are cast to (export_program; gdn.input_dtype)
        self.headed = False  # rows start after a prompt head (set_prefix)

    def set_prefix(self, conv, state) -> None:
        """Start every row after a prompt head whose last K-1 conv inputs and recurrent state
        these are (None, None: from zeros). Buffers, so they move with the module and export as
        constants."""
        self.headed = conv is not None
        for name, value in (("prefix_conv", conv), ("prefix_state", state)):
            self.register_buffer(name, value, persistent=False)

    def merge_projections(self) -> None:
        linears = (self.in_proj_qkv, self.in_proj_z, self.in_proj_b, self.in_proj_a)
        self.in_proj_sizes = [m.out_features for m in linears]
        self.in_proj = _merged(*linears)
        del self.in_proj_qkv, self.in_proj_z, self.in_proj_b, self.in_proj_a

    def forward(self, x, capture: list | None = None, head: tuple | None = None):
        """`capture`: a list that gets (conv inputs, state) after x's last token (prefix.py).
        `head`: a shared head's (conv inputs, state) from `forward_head`, which every row starts
        from (else the baked head's, if any)."""
        d = self.d
        b, t, _ = x.shape
        conv_state = state = None
        if head is not None:
            conv_state, state = head[0].expand(b, -1, -1), head[1].expand(b, -1, -1, -1)
        elif self.headed:
            conv_state = self.prefix_conv.expand(b, -1, -1)
            state = self.prefix_state.expand(b, -1, -1, -1)
        # b and a as one product (one launch rather than two narrow, launch-bound ones),
        # cast once to the fp32 the GatedDeltaNet kernels read, then split.
        nqkv, nz, nb, na = self.in_proj_sizes
        qkv, z, ba = parts(self.in_proj, x, [nqkv, nz, nb + na])
        b_logits, a_logits = ba.float().split([nb, na], dim=-1)
        if capture is not None:
            capture.append(_last(qkv, self.conv1d.weight.shape[-1] - 1))  # of a layer with no head
        qkv = causal_conv_silu(qkv, self.conv1d.weight, conv_state)  # causal depthwise conv
        # q, k, v stay in the model's dtype (the kernels accumulate in fp32 and return that dtype,
        # as transformers' own GDN does); the gates are fp32.
        heads = (d.linear_num_key_heads, d.linear_key_head_dim, d.linear_num_value_heads, d.linear_value_head_dim)
        dtype = qkv.dtype
        if self.gdn_dtype is not None:
            qkv = qkv.to(self.gdn_dtype)
        if capture is not None:  # the reference recurrence, for its final state
            o, final = recurrence(*split_qkv(qkv, *heads), *gates(a_logits, b_logits, self.A_log, self.dt_bias), state)
            capture.append(final)
        elif self.fused:
            o = gated_delta_fused(qkv, a_logits, b_logits, self.A_log, self.dt_bias, *heads, state)
        else:
            o = gated_delta(*split_qkv(qkv, *heads), *gates(a_logits, b_logits, self.A_log, self.dt_bias), state)
        return self._out(o.to(dtype), z)

    def _out(self, o, z):
        """The gated norm and output projection of the recurrence's output o [B, T, Hv, Dv]."""
        d = self.d
        b, t = z.shape[:2]
        z = z.reshape(b, t, d.linear_num_value_heads, d.linear_value_head_dim)
        o = rms_norm(o, self.norm.weight, d.rms_norm_eps, 0.0) * F.silu(z)
        return self.out_proj(o.reshape(b, t, d.value_dim))

    def forward_head(self, x):
        """A shared prompt head's stream, x [1, P, H] (every position real): its output, and
        (its last K-1 conv inputs, its final recurrent state), what `forward(head=...)` reads."""
        d = self.d
        nqkv, nz, nb, na = self.in_proj_sizes
        qkv, z, ba = parts(self.in_proj, x, [nqkv, nz, nb + na])
        b_logits, a_logits = ba.float().split([nb, na], dim=-1)
        conv = _last(qkv, self.conv1d.weight.shape[-1] - 1)
        qkv = causal_conv_silu(qkv, self.conv1d.weight, None)
        heads = (d.linear_num_key_heads, d.linear_key_head_dim, d.linear_num_value_heads, d.linear_value_head_dim)
        dtype = qkv.dtype
        if self.gdn_dtype is not None:
            qkv = qkv.to(self.gdn_dtype)
        if self.fused:
            o, state = gated_delta_fused_state(qkv, a_logits, b_logits, self.A_log, self.dt_bias, *heads)
        else:
            o, state = gated_delta_state(*split_qkv(qkv, *heads), *gates(a_logits, b_logits, self.A_log, self.dt_bias))
        return self._out(o.to(dtype), z), (conv, state)


class Attention(nn.Module):
    """Gated full attention: q_proj gives [query | gate] per head, q/k norms, partial RoPE, GQA."""

    def __init__(self, d: TextDims, kernel: str = "sdpa"):
        super().__init__()
        self.d, self.kernel = d, kernel
        hd = d.head_dim
        self.q_proj = nn.Linear(d.hidden_size, d.num_attention_heads * hd * 2, bias=False)
        self.k_proj = nn.Linear(d.hidden_size, d.num_key_value_heads * hd, bias=False)
        self.v_proj = nn.Linear(d.hidden_size, d.num_key_value_heads * hd, bias=False)
        self.o_proj = nn.Linear(d.num_attention_heads * hd, d.hidden_size, bias=False)
        self.q_norm = Norm(hd, d.rms_norm_eps)
        self.k_norm = Norm(hd, d.rms_norm_eps)
        self.headed = False  # rows start after a prompt head (set_prefix)

    def set_prefix(self, keys, values) -> None:
        """Read a prompt head's keys (rotated) and values, [1, P, Hkv, hd] each, ahead of every
        row's (None, None: no head)."""
        self.headed = keys is not None
        for name, value in (("prefix_k", keys), ("prefix_v", values)):
            self.register_buffer(name, value, persistent=False)

    def merge_projections(self) -> None:
        self.qkv_sizes = [m.out_features for m in (self.q_proj, self.k_proj, self.v_proj)]
        self.qkv_proj = _merged(self.q_proj, self.k_proj, self.v_proj)
        del self.q_proj, self.k_proj, self.v_proj

    def forward(self, x, cos, sin, lengths=None, capture: list | None = None, head: tuple | None = None):
        """`lengths`: fused.seqlens_k of the pass, made once for all layers (Backbone); without
        it (the reference maths, Layer.forward) the layer makes its own. cos and sin cover x's
        positions (after a prompt head's). `capture`: a list that gets x's (rotated) keys and
        values (prefix.py). `head`: a shared head's (keys, values) [1, P, Hkv, hd], read ahead of
        every row's (fused.suffix_attention; else the baked head's, if any)."""
        d = self.d
        b, t, _ = x.shape
        hd, hq, hkv = d.head_dim, d.num_attention_heads, d.num_key_value_heads
        # q_proj interleaves [query | gate] per head: each is its own product over those weight rows.
        w = self.qkv_proj.weight[: self.qkv_sizes[0]].view(hq, 2, hd, -1)
        q = F.linear(x, w[:, 0].reshape(hq * hd, -1)).view(b, t, hq, hd)
        gate = F.linear(x, w[:, 1].reshape(hq * hd, -1))
        nq, nk, nv = self.qkv_sizes
        k, v = rows(self.qkv_proj, x, nq, nq + nk), rows(self.qkv_proj, x, nq + nk, nq + nk + nv)
        # One RotaryEmbedding kernel each with the fused attention; traced with sdpa (fp32 graphs,
        # where ONNX Runtime's CUDA provider has no GroupQueryAttention kernel either).
        rotate = fused.rotary if self.kernel == "gqa" else fused.rope
        q = rotate(self.q_norm(q), cos, sin)  # [B, T, Hq, hd]
        k = rotate(self.k_norm(k.view(b, t, hkv, hd)), cos, sin)
        v = v.view(b, t, hkv, hd)
        if capture is not None:
            capture += [k, v]
        if head is not None:  # a shared head's keys and values ahead of every row's
            k = torch.cat([head[0].expand(b, -1, -1, -1), k], 1)
            v = torch.cat([head[1].expand(b, -1, -1, -1), v], 1)
            o = fused.suffix_attention(q, k, v, hd**-0.5)
            return self.o_proj(o * torch.sigmoid(gate.reshape(b, t, hq * hd)))
        keys, values = (self.prefix_k, self.prefix_v) if self.headed else (None, None)
        n = 0
        if keys is not None:
            # The head's keys and values ahead of the row's, and zero queries at the head's
            # positions, whose outputs are dropped: the one causal kernel then reads the whole
            # prompt at any batch size (its past-key input takes several new tokens at batch 1 only).
            n = keys.shape[1]
            k = torch.cat([keys.expand(b, -1, -1, -1), k], 1)
            v = torch.cat([values.expand(b, -1, -1, -1), v], 1)
            q = torch.cat([q.new_zeros(b, n, hq, hd), q], 1)
        if self.kernel == "gqa":
            o = fused.causal_attention(q, k, v, fused.seqlens_k(x, n) if lengths is None else lengths, hd**-0.5)
        else:
            o = fused.attention_reference(q, k, v, hd**-0.5)
        if keys is not None:
            o = o[:, n:]
        return self.o_proj(o * torch.sigmoid(gate.reshape(b, t, hq * hd)))


class Layer(nn.Module):
    def __init__(self, d: TextDims, kind: str, attention: str = "sdpa"):
        super().__init__()
        self.kind = kind
        if kind == "linear_attention":
            self.linear_attn = GatedDeltaNet(d)
        else:
            self.self_attn = Attention(d, attention)
        self.mlp = MLP(d)
        self.input_layernorm = Norm(d.hidden_size, d.rms_norm_eps)
        self.post_attention_layernorm = Norm(d.hidden_size, d.rms_norm_eps)

    def mix(self, h, cos, sin, lengths=None):
        """The token mixer: Gated DeltaNet or gated full attention."""
        return self.linear_attn(h) if self.kind == "linear_attention" else self.self_attn(h, cos, sin, lengths)

    def forward(self, x, cos, sin):
        """The reference maths, one layer (Backbone.hidden_states runs the same sums fused)."""
        h = self.input_layernorm(x)
        x = x + self.mix(h, cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


def add_norm(norm: Norm, x: torch.Tensor, delta: torch.Tensor | None):
    """(norm(x + delta), x + delta) as one kernel once exported (fused.add_rms_norm); without a
    delta, (norm(x), x)."""
    if delta is None:
        return norm(x), x
    return fused.add_rms_norm(delta, x, norm.offset + norm.weight.float(), norm.eps)


class Backbone(nn.Module):
    def __init__(
        self, d: TextDims, readout: str = "last", letter_ids: list[int] | None = None, attention: str = "sdpa"
    ):
        super().__init__()
        self.d, self.readout, self.attention = d, readout, attention
        self.embed_tokens = nn.Embedding(d.vocab_size, d.hidden_size)
        self.layers = nn.ModuleList(Layer(d, kind, attention) for kind in d.layer_types)
        self.norm = Norm(d.hidden_size, d.rms_norm_eps)
        rot = d.rotary_dim
        self.register_buffer(
            "inv_freq", 1.0 / (d.rope_theta ** (torch.arange(0, rot, 2).float() / rot)), persistent=False
        )
        self.letter_ids = list(letter_ids or [])
        self.prefix_ids: list[int] = []  # a baked prompt head (set_prefix): rows start after it
        self.register_buffer("prefix_hidden", None, persistent=False)
        self.register_buffer("prefix_tokens", None, persistent=False)

    def set_prefix(self, ids: list[int], layers: list[tuple], hidden=None) -> None:
        """Bake a prompt head in: `layers` holds, per layer, what bake.capture took from it
        (GDN: conv inputs and state; attention: keys and values), or ([], []) to remove it;
        `hidden`, its final-norm hidden states [1, P, H], which the "all" readout puts ahead of
        the row's (so its positions are the whole prompt's), with the head's ids (`full_ids`)."""
        self.prefix_ids = list(ids)
        for layer, states in zip(self.layers, layers or [(None, None)] * len(self.layers), strict=True):
            (layer.linear_attn if layer.kind == "linear_attention" else layer.self_attn).set_prefix(*states)
        keep = bool(ids) and self.readout == "all"
        self.register_buffer("prefix_hidden", hidden.float() if keep else None, persistent=False)
        self.register_buffer("prefix_tokens", torch.tensor([list(ids)]) if keep else None, persistent=False)

    def full_ids(self, input_ids):
        """The ids of the whole prompt: the baked head's ahead of `input_ids` (an "all" readout's)."""
        if self.prefix_tokens is None:
            return input_ids
        return torch.cat([self.prefix_tokens.expand(input_ids.shape[0], -1), input_ids], 1)

    def rope(self, t: int, device, dtype, start: int = 0):
        """cos, sin [T, rot/2] at positions start..start+T-1 (one column per frequency: fused.rope
        pairs dims i and i + rot/2), computed in fp32, once a pass. Text positions are the same on
        all three MRoPE axes, which reduces to plain 1-D RoPE."""
        freqs = (torch.arange(t, device=device).float() + start)[:, None] * self.inv_freq.to(device).float()[None, :]
        return freqs.cos().to(dtype), freqs.sin().to(dtype)

    def hidden_states(self, input_ids):
        x = self.embed_tokens(input_ids)
        head = len(self.prefix_ids)
        cos, sin = self.rope(input_ids.shape[1], input_ids.device, x.dtype, head)
        lengths = fused.seqlens_k(x, head) if self.attention == "gqa" else None
        # Layer by layer, the same sums as Layer.forward, but each residual add runs inside the norm
        # that follows it: the MLP's output is added by the next layer's input norm (the last
        # one's by the final norm).
        delta = None
        for layer in self.layers:
            h, x = add_norm(layer.input_layernorm, x, delta)
            h, x = add_norm(layer.post_attention_layernorm, x, layer.mix(h, cos, sin, lengths))
            delta = layer.mlp(h)
        return add_norm(self.norm, x, delta)[0]

    def shared_hidden(self, head_ids, input_ids):
        """Final-norm hidden states [B, T, H] of rows `input_ids` that all continue one prompt
        head `head_ids` [1, P]: the head runs once, as a stream of its own (batch 1), and each
        layer's rows start from what it leaves (GDN: last conv inputs and recurrent state;
        attention: rotated keys and values), at positions from P on. The same sums as running
        every row whole (`hidden_states` on head + row), without repeating the head per row."""
        xh, x = self.embed_tokens(head_ids), self.embed_tokens(input_ids)
        # One table for head and rows, sliced at P: an offset added to the rows' positions would
        # be shape arithmetic meeting data, which ONNX Runtime runs on the host.
        p = head_ids.shape[1]
        cos_all, sin_all = self.rope(p + input_ids.shape[1], input_ids.device, x.dtype)
        cos_h, sin_h, cos, sin = cos_all[:p], sin_all[:p], cos_all[p:], sin_all[p:]
        lengths_h = fused.seqlens_k(xh) if self.attention == "gqa" else None
        delta_h = delta = None
        for layer in self.layers:
            hh, xh = add_norm(layer.input_layernorm, xh, delta_h)
            h, x = add_norm(layer.input_layernorm, x, delta)
            if layer.kind == "linear_attention":
                mixed_h, states = layer.linear_attn.forward_head(hh)
                mixed = layer.linear_attn(h, head=states)
            else:
                taken: list = []
                mixed_h = layer.self_attn(hh, cos_h, sin_h, lengths_h, capture=taken)
                mixed = layer.self_attn(h, cos, sin, head=(taken[0], taken[1]))
            hh, xh = add_norm(layer.post_attention_layernorm, xh, mixed_h)
            h, x = add_norm(layer.post_attention_layernorm, x, mixed)
            delta_h, delta = layer.mlp(hh), layer.mlp(h)
        return add_norm(self.norm, x, delta)[0]

    def forward(self, input_ids, positions=None):
        return self.read(self.hidden_states(input_ids), positions)

    def read(self, hs, positions=None):
        """The readout of final-norm hidden states hs [B, T, H] (`positions`: each row's last)."""
        if self.readout == "all":
            if self.prefix_hidden is not None:
                return torch.cat([self.prefix_hidden.expand(hs.shape[0], -1, -1), hs.float()], 1)
            return hs.float()
        idx = positions.view(-1, 1, 1).expand(-1, 1, hs.shape[-1])
        hidden = torch.gather(hs, 1, idx).squeeze(1).float()
        if self.readout == "letters":
            rows = self.embed_tokens.weight[self.letter_ids].float()  # [n, H]
            return hidden, hidden @ rows.T
        return hidden

    def load_text_state(self, state: dict, consume: bool = False) -> None:
        """Load a weights.load_text_state dict (an untied lm_head is not part of the backbone),
        then stack the projections that read the same input into one weight each (MLP gate+up,
        GDN qkv+z+b+a, attention q+k+v), read part by part: one matrix product per part, no split
        kernel (models/projections.py). A stacked weight is read by several products, so the
        exporter's optimizer leaves its row slices and transposes to models/fold.py, which folds
        them one weight at a time as the graph is saved, instead of holding each folded copy in
        memory.
        Each tensor is copied into its parameter in the parameter's dtype (`copy_` converts as
        `.to` does), and `consume` drops it from `state` once copied, so the load holds about one
        copy of the weights, not the checkpoint's plus the module's (what a 27B export needs).
        Stacked layer by layer, so peak memory grows by one layer's projections."""
        import torch

        own = self.state_dict(keep_vars=True)
        keys = [k for k in state if k != "lm_head.weight"]
        missing, unexpected = sorted(set(own) - set(keys)), sorted(set(keys) - set(own))
        if missing or unexpected:
            raise ValueError(
                "checkpoint does not match the Qwen3.5 text stack: missing %s, unexpected %s"
                % (missing[:6], unexpected[:6])
            )
        for k in keys:  # every shape before the first copy: a refused state is left whole
            if own[k].shape != state[k].shape:
                raise ValueError(
                    "checkpoint does not match the Qwen3.5 text stack: %s is %s, expected %s"
                    % (k, tuple(state[k].shape), tuple(own[k].shape))
                )
        with torch.no_grad():
            for k in keys:
                own[k].copy_(state[k])
                if consume:
                    del state[k]
        for layer in self.layers:
            for module in (layer.mlp, layer.linear_attn if layer.kind == "linear_attention" else layer.self_attn):
                module.merge_projections()


class SharedHead(nn.Module):
    """A backbone ("last" or "letters" readout, no baked head) whose graph takes a prompt head
    per pass: forward(head_ids [1, P], input_ids [B, T], positions [B]), every row continuing the
    head (`Backbone.shared_hidden`), positions counted within the row after it. A request's
    candidates that repeat one long state then run it once a pass, not once a row."""

    def __init__(self, backbone: Backbone):
        super().__init__()
        if backbone.readout == "all" or backbone.prefix_ids:
            raise ValueError("a shared head needs a backbone with a per-row readout and no baked head")
        self.backbone = backbone
        self.d, self.readout = backbone.d, backbone.readout

    def forward(self, head_ids, input_ids, positions):
        return self.backbone.read(self.backbone.shared_hidden(head_ids, input_ids), positions)
