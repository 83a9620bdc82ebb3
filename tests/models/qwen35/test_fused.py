"""The fused kernels the backbone exports (models.qwen35.fused): which attention each dtype gets,
and that each op's ONNX Runtime kernel computes its torch reference."""

from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest
import torch

from models.qwen35 import export, fused, weights
from models.qwen35.dims import TextDims


def test_attention_choice_follows_the_dtype():
    assert fused.attention_for("float32") == "sdpa"  # the CUDA provider has no fp32 GQA kernel
    assert fused.attention_for("float16") == "gqa"
    assert fused.attention_for("bfloat16") == "gqa"


def test_exported_graph_uses_one_kernel_per_norm_attention_and_projection(tied_letters_export, qwen_tied):
    module, path = tied_letters_export
    dims = TextDims.from_dir(qwen_tied)
    ops = collections.Counter(n.op_type for n in onnx.load(path, load_external_data=False).graph.node)
    layers = len(dims.layer_types)
    full = dims.layer_types.count("full_attention")
    # q/k norms per attention layer, the GDN output norm per GDN layer and the first layer's
    # input norm are plain; every other input and post-attention norm and the final one also do
    # the residual add before them (SkipSimplifiedLayerNormalization), and hand the sum on
    # (output 3) but for the final norm; their statistics are not named, so not computed.
    assert ops["SimplifiedLayerNormalization"] == 2 * full + (layers - full) + 1
    assert ops["SkipSimplifiedLayerNormalization"] == 2 * layers
    skips = [
        n
        for n in onnx.load(path, load_external_data=False).graph.node
        if n.op_type == "SkipSimplifiedLayerNormalization"
    ]
    assert sum(len(n.output) == 4 and bool(n.output[3]) for n in skips) == 2 * layers - 1
    assert all(not n.output[1] and not n.output[2] for n in skips if len(n.output) > 1)
    assert ops["GroupQueryAttention"] == (full if module.attention == "gqa" else 0)
    assert ops["Softmax"] == (0 if module.attention == "gqa" else full)
    # With it, RoPE is one RotaryEmbedding for q and one for k; traced, rotate-half negates.
    assert ops["RotaryEmbedding"] == (2 * full if module.attention == "gqa" else 0)
    assert ops["Neg"] == (0 if module.attention == "gqa" else 2 * full)
    # The rows' lengths GroupQueryAttention reads are counted once a pass, for every layer.
    assert ops["IsNaN"] == (1 if module.attention == "gqa" else 0)
    assert ops["Pow"] == 0 and ops["ReduceMean"] == 0
    # One matrix product per projection, none of them split: MLP gate, up, down; GDN qkv, z, b
    # with a (one narrow product, split after its cast), out; attention q, gate, k, v, o; plus the
    # letter readout. Traced attention adds its QKᵀ and ·V per attention layer.
    gdn = layers - full
    assert ops["MatMul"] == 3 * layers + 4 * gdn + 5 * full + 1 + (0 if module.attention == "gqa" else 2 * full)
    # The splits: the GDN's b|a gates, and the conv output's q/k/v for the LinearAttention kernel.
    assert ops["Split"] == 2 * gdn


@pytest.mark.slow
def test_fused_ops_match_their_torch_reference_in_half_precision(qwen_tied, artifacts):
    """An fp16 graph (GroupQueryAttention, fp16 norms, LinearAttention fed fp32) on ONNX Runtime's
    CPU kernels stays within fp16 rounding of the fp32 torch module."""
    import onnxruntime as ort

    dims = TextDims.from_dir(qwen_tied)
    state = weights.load_text_state(qwen_tied, torch.float32)
    ref = export.build_module(dims, state, "last", "float32", attention="sdpa")
    half = export.build_module(dims, state, "last", "float16")
    assert half.attention == "gqa"
    out = artifacts / "qwen-tied-onnx-fp16"
    out.mkdir()
    path = export.export_graph(half, str(out), progress=lambda m: None)
    ids, positions = export.example_inputs(dims.vocab_size, 3, 133, seed=5)
    with torch.no_grad():
        want = ref(ids, positions).numpy()
    (got,) = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        None, {"input_ids": ids.numpy(), "positions": positions.numpy()}
    )
    assert got.dtype == np.float32  # the readout is cast back to fp32
    rel = float(np.abs(got - want).max() / np.abs(want).max())
    assert 0 < rel <= 2e-2


@pytest.mark.slow
def test_fused_gdn_kernel_is_the_same_maths_in_one_packed_node(qwen_tied, artifacts):
    """`gated_delta_net_fused`: torch runs the layer through `gated_delta_fused` with the same
    numbers as the split q/k/v and graph-side gates, and the export feeds each GatedDeltaNet node
    the conv output whole ([B·T, C], no key or value input) and the raw gate logits, with the
    decay and beta activations done by the node. (The node has only a CUDA kernel: its numbers
    are checked on the GPU, benchmarks/gpu/drift.py.)"""
    dims = TextDims.from_dir(qwen_tied)
    state = weights.load_text_state(qwen_tied, torch.float32)
    module = export.build_module(dims, state, "letters", letter_ids=list(range(32, 58)), attention="sdpa")
    out = artifacts / "qwen-tied-onnx-gdn-fused"
    out.mkdir()
    path = export.export_graph(module, str(out), kernel="gated_delta_net_fused", progress=lambda m: None)
    layers = [m for m in module.modules() if m.__class__.__name__ == "GatedDeltaNet"]
    assert layers and all(m.fused for m in layers)
    ids, positions = export.example_inputs(dims.vocab_size, 2, 70, seed=4)
    with torch.no_grad():
        fused_out = module(ids, positions)
        for m in layers:
            m.fused = False
        plain_out = module(ids, positions)
    for a, b in zip(fused_out, plain_out):
        assert torch.equal(a, b)

    graph = onnx.load(path, load_external_data=False).graph
    gdn = [n for n in graph.node if n.op_type == "GatedDeltaNet"]
    gdn_layers = dims.layer_types.count("linear_attention")
    assert len(gdn) == gdn_layers
    attrs = {a.name: (a.s.decode() if a.type == onnx.AttributeProto.STRING else a.i) for a in gdn[0].attribute}
    assert attrs["gate_activation"] == "qwen" and attrs["beta_activation"] == "sigmoid" and attrs["qk_l2_norm"] == 1
    for node in gdn:
        assert node.input[0] and not node.input[1] and not node.input[2]  # packed q|k|v, no key, no value
        assert all(node.input[i] for i in (4, 5, 6, 7, 8))  # decay, beta, state, A_log, dt_bias
        assert len(node.output) == 2
    plain_dir = artifacts / "qwen-tied-onnx-gdn-linear"
    plain_dir.mkdir()
    plain_path = export.export_graph(module, str(plain_dir), kernel="linear_attention", progress=lambda m: None)
    assert not any(m.fused for m in layers)
    ops, plain_ops = (
        collections.Counter(n.op_type for n in onnx.load(p, load_external_data=False).graph.node)
        for p in (path, plain_path)
    )
    # Gone per GDN layer against the graph-side gates: the conv output's q/k/v split, the
    # softplus and the beta sigmoid.
    assert plain_ops["LinearAttention"] == gdn_layers and ops["LinearAttention"] == 0
    assert ops["Split"] == plain_ops["Split"] - gdn_layers
    assert ops["Sigmoid"] == plain_ops["Sigmoid"] - gdn_layers
    assert plain_ops["Softplus"] == gdn_layers and ops["Softplus"] == 0
