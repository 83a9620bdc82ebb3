"""Our written-out ModernBERT forward against transformers' own, and the fused export against the
traced one: the same answers, far fewer nodes."""

from __future__ import annotations

import collections

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from models.laya import encoder as enc, fused  # noqa: E402
from models.laya.graph import build_encoder, scale_like_trained, LayaDecisionGraph  # noqa: E402

# A window of 8 tokens (4 each side) so the sliding layers' band matters at test lengths.
CONFIG = dict(
    hidden_size=64,
    num_hidden_layers=4,
    num_attention_heads=2,
    intermediate_size=96,
    vocab_size=300,
    max_position_embeddings=256,
    local_attention=8,
    global_attn_every_n_layers=3,
    global_rope_theta=160000.0,
    local_rope_theta=10000.0,
    hidden_activation="gelu",
    norm_eps=1e-5,
    norm_bias=False,
    pad_token_id=0,
)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = LayaDecisionGraph(build_encoder(CONFIG), head_layers=2, n_act=2)
    scale_like_trained(m, seed=0)
    return m.eval()


def _batch(lengths, t, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 300, (len(lengths), t), generator=g)
    mask = torch.zeros(len(lengths), t, dtype=torch.long)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    return ids, mask


def test_layer_types_and_thetas_follow_the_config(model):
    config = model.encoder.config
    assert enc.layer_types(config) == ["full_attention", "sliding_attention", "sliding_attention", "full_attention"]
    assert enc._thetas(config) == {"full_attention": 160000.0, "sliding_attention": 10000.0}


@pytest.mark.parametrize("attention", ["sdpa", "mha"])
def test_encode_matches_transformers_modernbert(model, attention):
    ids, mask = _batch([37, 20, 9], 37)
    with torch.no_grad():
        positions = torch.arange(ids.shape[1]).expand_as(ids)
        ours = enc.encode(model.encoder, model.rotary, ids, positions, enc.segment_bias(mask, torch.float32), attention)
        theirs = model.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
    real = mask.bool()
    assert torch.allclose(ours[real], theirs[real], atol=2e-5), (ours[real] - theirs[real]).abs().max()
    assert torch.isfinite(ours).all()  # pad queries outside every window stay finite


def test_window_bias_masks_beyond_half_the_window():
    band = enc.window_bias(10, 4, "cpu")
    assert band[0, 4] == 0 and band[0, 5] == fused.MASKED and band[9, 5] == 0 and band[9, 4] == fused.MASKED
    assert torch.equal(band, band.T)


def test_rotary_reference_is_transformers_rotate_half():
    from transformers.models.modernbert.modeling_modernbert import apply_rotary_pos_emb

    caches = enc.RotaryCaches(build_encoder(CONFIG).config)
    cos, sin = caches.get("sliding_attention")
    x = torch.randn(2, 11, 2 * 32)
    ours = fused.rotary_reference(x, torch.arange(11).expand(2, 11), cos, sin, heads=2)
    q = x.reshape(2, 11, 2, 32).transpose(1, 2)
    c, s = (torch.cat([z[:11], z[:11]], -1)[None] for z in (cos, sin))
    theirs, _ = apply_rotary_pos_emb(q, q, c, s)
    assert torch.allclose(ours, theirs.transpose(1, 2).reshape(2, 11, 64), atol=1e-6)


@pytest.fixture(scope="module")
def exports(english, tmp_path_factory):
    """The fused export, and the traced one the exporter writes for heads too wide for ONNX
    Runtime's rotary kernel (here: a kernel made narrower than these heads)."""
    from models.laya import export

    root = tmp_path_factory.mktemp("laya-attention")
    export.export(english[0], str(root / "mha"), progress=None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fused, "ROTARY_BLOCK", 1)
        export.export(english[0], str(root / "sdpa"), progress=None)
    return {kind: str(root / kind) for kind in ("sdpa", "mha")}


def _ops(path):
    """(op counts, nodes that run per pass): nodes fed only by weights and constants are folded
    when ONNX Runtime loads the graph, so they launch nothing."""
    import onnx

    graph = onnx.load(path + "/model.onnx", load_external_data=False).graph
    live, running = {i.name for i in graph.input}, 0
    for node in graph.node:  # topological order
        if any(name in live for name in node.input):
            live.update(node.output)
            running += 1
    return collections.Counter(n.op_type for n in graph.node), running


@pytest.mark.slow
def test_fused_export_emits_one_kernel_per_rotary_and_attention(exports, english):
    from models.manifest import read

    meta = read(exports["mha"])
    layers, head = meta["dims"]["num_hidden_layers"], meta["config"]["head_layers"]
    assert meta["export_options"]["attention"] == "mha"
    assert read(exports["sdpa"])["export_options"]["attention"] == "sdpa"
    ops, nodes = _ops(exports["mha"])
    traced, traced_nodes = _ops(exports["sdpa"])
    # One rotary kernel a layer over q, k and v from one product, cut by one Split; the decision
    # layers' in-projection split is the other Split each.
    assert ops["RotaryEmbedding"] == layers and ops["MultiHeadAttention"] == layers + head
    assert ops["Split"] == layers + head
    # Against the traced graph, each layer has one product for q, k and v instead of three, and
    # every layer (decision layers too) none for QKᵀ and ·V.
    assert traced["MatMul"] - ops["MatMul"] == 2 * layers + 2 * (layers + head)
    import onnx

    heads, hidden = meta["dims"]["num_attention_heads"], meta["dims"]["hidden_size"]
    group = fused.packed_group(heads, hidden // heads)
    for node in onnx.load(exports["mha"] + "/model.onnx", load_external_data=False).graph.node:
        if node.op_type == "RotaryEmbedding":  # several heads' q, k, v a kernel block, in pair order
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            assert attrs["interleaved"] == 1 and attrs["num_heads"] == heads // group, attrs
            assert attrs["rotary_embedding_dim"] == 2 * group * (hidden // heads), attrs
    assert ops["BiasGelu"] == layers and ops.get("Gelu", 0) == 0 and traced["Gelu"] == 0
    # Every encoder and decision-layer LayerNorm runs in the skip kernel (the first layer's
    # attention norm is an Identity); the fp32 scorer's stays a LayerNormalization.
    assert ops["SkipLayerNormalization"] == 2 * layers + 1 + 2 * head and ops["LayerNormalization"] == 1
    # The encoder's 2 residual adds a layer run inside the next norm's kernel, which hands the sum
    # on (output 3); the last one's sum feeds nothing but the final norm, so it is not named.
    summing = [
        n
        for n in onnx.load(exports["mha"] + "/model.onnx", load_external_data=False).graph.node
        if n.op_type == "SkipLayerNormalization" and len(n.output) == 4
    ]
    assert len(summing) == 2 * layers - 1 and all(n.output[3] and not n.output[1] and not n.output[2] for n in summing)
    assert traced["Add"] - ops["Add"] >= 2 * layers
    assert ops["Softmax"] == 1 and traced["Softmax"] == 1 + layers + head  # only the act features'
    assert nodes < traced_nodes / 2, (nodes, traced_nodes)


@pytest.mark.slow
def test_fused_and_traced_exports_agree_on_ort(exports):
    import onnxruntime as ort

    from models.laya import export

    sessions = {
        k: ort.InferenceSession(p + "/model.onnx", providers=["CPUExecutionProvider"]) for k, p in exports.items()
    }
    for batch, seq, markers in ((1, 8, 2), (4, 150, 3)):
        feeds = dict(zip(export.INPUTS, (t.numpy() for t in export.example_batch(800, batch, seq, markers, seed=7))))
        a, b = (s.run(None, feeds) for s in (sessions["mha"], sessions["sdpa"]))
        for x, y in zip(a, b):
            assert np.abs(x - y).max() < 1e-4


@pytest.mark.parametrize("heads, head_dim, group", [(2, 32, 2), (16, 64, 4), (12, 64, 4), (1, 64, 1), (3, 320, 1)])
def test_packed_rotary_is_rotate_half_on_q_and_k_and_leaves_v(heads, head_dim, group):
    """One product's rows in packed_order, rotated a group of heads a block and split, are
    rotate_half of q and k permuted into pair order (attention's q·k is unchanged) and v as it is."""
    assert fused.packed_group(heads, head_dim) == group
    d = heads * head_dim
    order = torch.tensor(fused.packed_order(heads, head_dim))
    assert sorted(order.tolist()) == list(range(3 * d))
    positions = torch.arange(40, dtype=torch.float32)[:, None]
    freqs = positions / (10000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim))[None, :]
    cos, sin = freqs.cos(), freqs.sin()
    x = torch.randn(3, 17, 3 * d)
    at = torch.randint(0, 40, (3, 17))
    packed = fused.packed_rotary_reference(
        x[..., order], at, cos.repeat(1, 2 * group), sin.repeat(1, 2 * group), heads // group, 2 * group * head_dim
    )
    q, k, v = fused.unpack_qkv(packed, heads // group)
    pairs = torch.tensor(fused.pair_order(heads, head_dim))
    assert torch.allclose(q, fused.rotary_reference(x[..., :d], at, cos, sin, heads)[..., pairs], atol=1e-6)
    assert torch.allclose(k, fused.rotary_reference(x[..., d : 2 * d], at, cos, sin, heads)[..., pairs], atol=1e-6)
    assert torch.equal(v, x[..., 2 * d :])


def test_heads_too_wide_for_the_rotary_kernel_take_the_traced_attention():
    assert fused.attention_for(64) == "mha" and fused.attention_for(512) == "sdpa"
    with pytest.raises(ValueError, match="too wide .*traced attention"):
        fused.packed_group(2, 512)
