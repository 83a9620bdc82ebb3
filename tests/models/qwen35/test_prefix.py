"""A prompt head baked into the Qwen3.5 graph (prefix.py): rows holding only the tokens after it
give what transformers gives for the whole prompt, in torch and through ONNX Runtime, alone or
batched; the head's states are the float32 reference's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.qwen35 import bake, export, prefix, weights
from models.qwen35.dims import TextDims
from tests.models.qwen35.conftest import reference
from tests.models.qwen35.test_backbone import _rel

HEAD = 37  # tokens: over the conv's K-1 and under one GDN chunk
TAILS = [150, 97, 5, 1]  # after the head: > 2 GDN chunks, ragged, short, one token


def _rows(vocab: int, seed: int = 3):
    g = torch.Generator().manual_seed(seed)
    head = torch.randint(0, vocab - 8, (HEAD,), generator=g).tolist()
    tails = [torch.randint(0, vocab - 8, (n,), generator=g).tolist() for n in TAILS]
    return head, tails


def _transformers_last(directory: str, rows):
    model = reference(directory)
    text = model.model.language_model if hasattr(model.model, "language_model") else model.model
    with torch.no_grad():
        return torch.stack([text(input_ids=torch.tensor([r])).last_hidden_state[0, -1] for r in rows])


def _padded(tails, pad_id: int):
    ids = np.full((len(tails), max(map(len, tails))), pad_id, dtype=np.int64)
    for i, t in enumerate(tails):
        ids[i, : len(t)] = t
    return ids, np.array([len(t) - 1 for t in tails], dtype=np.int64)


@pytest.fixture(scope="module", params=["sdpa", "gqa"])
def baked(request, qwen_tied, tmp_path_factory):
    """(module with the head baked in, its ONNX export, head, tails, transformers' hidden states of
    head + tail)."""
    dims = TextDims.from_dir(qwen_tied)
    module = export.build_module(
        dims, weights.load_text_state(qwen_tied, torch.float32), "last", attention=request.param
    )
    head, tails = _rows(dims.vocab_size)
    want = _transformers_last(qwen_tied, [head + t for t in tails])
    bake.bake(module, head)
    path = export.export_graph(module, str(tmp_path_factory.mktemp("prefix-" + request.param)), progress=lambda m: None)
    return module, path, head, tails, want


def test_torch_rows_after_a_baked_head_are_the_whole_prompts(baked):
    module, _, _, tails, want = baked
    ids, positions = _padded(tails, pad_id=7)
    with torch.no_grad():
        got = module(torch.from_numpy(ids), torch.from_numpy(positions))
    assert _rel(got, want) <= 1e-4


def test_onnx_rows_after_a_baked_head_are_the_whole_prompts_alone_or_batched(baked):
    import onnxruntime as ort

    _, path, _, tails, want = baked
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ids, positions = _padded(tails, pad_id=7)
    (together,) = session.run(None, {"input_ids": ids, "positions": positions})
    assert _rel(together, want) <= 1e-4
    for i, t in enumerate(tails):
        (alone,) = session.run(None, {"input_ids": np.array([t]), "positions": np.array([len(t) - 1])})
        assert np.abs(alone[0] - together[i]).max() <= 1e-5 * max(1.0, float(np.abs(alone).max()))


def test_the_graph_holds_the_head_as_constants_and_starts_its_rows_after_it(baked):
    import onnx

    module, path, head, _, _ = baked
    graph = onnx.load(path, load_external_data=False).graph
    assert [i.name for i in graph.input] == ["input_ids", "positions"]
    kinds = {n.op_type for n in graph.node}
    assert "CausalConvWithState" in kinds and "LinearAttention" in kinds
    for node in graph.node:
        if node.op_type == "CausalConvWithState":
            assert node.input[3], "the conv reads the head's inputs as its past state"
        if node.op_type == "LinearAttention":
            assert node.input[3], "the recurrence starts from the head's state"
    assert module.prefix_ids == head


def test_capture_is_the_float32_reference_whatever_the_module_dtype(qwen_tied):
    """A half-precision module's head is computed in float32 and stored in its dtype (GDN states
    in float32), so it is no worse than the whole prompt run in that dtype."""
    dims = TextDims.from_dir(qwen_tied)
    state = weights.load_text_state(qwen_tied, torch.float32)
    full = export.build_module(dims, dict(state), "last")
    half = export.build_module(dims, dict(state), "last", dtype="float16", attention="sdpa")
    head, _ = _rows(dims.vocab_size)
    (exact, hidden), (rounded, _) = bake.capture(full, head), bake.capture(half, head)
    assert hidden.shape == (1, HEAD, dims.hidden_size) and hidden.dtype == torch.float32
    for layer, a, b in zip(full.layers, exact, rounded):
        if layer.kind == "linear_attention":
            assert b[0].dtype == torch.float16 and b[1].dtype == torch.float32
            assert torch.allclose(a[1], b[1], rtol=1e-2, atol=1e-3)
        else:
            assert b[0].dtype == b[1].dtype == torch.float16
        assert torch.allclose(a[0].half(), b[0], rtol=1e-2, atol=1e-3)


def test_a_stale_head_is_refused():
    prefix.check_head({"prefix": {"ids": [1, 2]}}, [1, 2])
    prefix.check_head({}, [1, 2])
    with pytest.raises(ValueError, match="export command again"):
        prefix.check_head({"prefix": {"ids": [1, 2]}}, [1, 2, 3], "cua-s1")


def test_the_all_readout_returns_the_heads_positions_too(qwen_tied):
    """Clef-Flash's readout: every position's hidden state, the baked head's from constants, so
    the output is the whole prompt's; `full_ids` gives the whole prompt's ids."""
    dims = TextDims.from_dir(qwen_tied)
    module = export.build_module(dims, weights.load_text_state(qwen_tied, torch.float32), "all")
    head, tails = _rows(dims.vocab_size)
    model = reference(qwen_tied)
    text = model.model.language_model if hasattr(model.model, "language_model") else model.model
    bake.bake(module, head)
    ids = torch.tensor([tails[1]])
    with torch.no_grad():
        want = text(input_ids=torch.tensor([head + tails[1]])).last_hidden_state
        got = module(ids)
    assert got.shape == want.shape and _rel(got, want) <= 1e-4
    assert module.full_ids(ids).tolist() == [head + tails[1]]


def test_common_prefix_of_rows():
    head = [5, 6, 7, 8]
    assert prefix.common([head + [1, 2], head + [3], head + [9, 9, 9]]) == len(head)
    assert prefix.common([head + [1]]) == len(head) + 1  # a lone row: all of it
    assert prefix.common([head, head + [1]]) == len(head)  # one row is the other's prefix
    assert prefix.common([[1, 2], [3, 4]]) == 0 and prefix.common([]) == 0
