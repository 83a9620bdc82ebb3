"""A prompt head given per pass (graph.SharedHead): rows holding only the tokens after it give
what transformers gives for the whole prompts, in torch and through ONNX Runtime, whatever the
head's length; the head runs once a pass, as a stream of its own."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.qwen35 import export, weights
from models.qwen35.dims import TextDims
from models.qwen35.graph import SharedHead
from tests.models.qwen35.test_backbone import _rel
from tests.models.qwen35.test_prefix import _padded, _transformers_last

TAILS = [150, 97, 5, 1]  # after the head: > 2 GDN chunks, ragged, short, one token


def _rows(vocab: int, head: int, seed: int = 3):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab - 8, (head,), generator=g).tolist()
    return ids, [torch.randint(0, vocab - 8, (n,), generator=g).tolist() for n in TAILS]


@pytest.fixture(scope="module", params=["sdpa", "gqa"])
def shared(request, qwen_tied, tmp_path_factory):
    """(SharedHead module, its ONNX export)."""
    dims = TextDims.from_dir(qwen_tied)
    backbone = export.build_module(
        dims, weights.load_text_state(qwen_tied, torch.float32), "last", attention=request.param
    )
    module = SharedHead(backbone)
    path = export.export_graph(module, str(tmp_path_factory.mktemp("shared-" + request.param)), progress=lambda m: None)
    return module, path, qwen_tied


@pytest.mark.parametrize("head_len", [1, 37, 130])  # one token; over the conv's K-1; > 2 GDN chunks
def test_rows_after_a_shared_head_are_the_whole_prompts(shared, head_len):
    import onnxruntime as ort

    module, path, directory = shared
    head, tails = _rows(module.d.vocab_size, head_len)
    want = _transformers_last(directory, [head + t for t in tails])
    ids, positions = _padded(tails, pad_id=7)
    feeds = {"head_ids": np.array([head]), "input_ids": ids, "positions": positions}
    with torch.no_grad():
        got = module(*(torch.from_numpy(feeds[k]) for k in ("head_ids", "input_ids", "positions")))
    assert _rel(got, want) <= 1e-4
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (together,) = session.run(None, feeds)
    assert _rel(together, want) <= 1e-4
    t = tails[1]
    (alone,) = session.run(None, {**feeds, "input_ids": np.array([t]), "positions": np.array([len(t) - 1])})
    assert np.abs(alone[0] - together[1]).max() <= 1e-5 * max(1.0, float(np.abs(alone).max()))


def test_the_graph_takes_the_head_as_an_input(shared):
    import onnx

    _, path, _ = shared
    graph = onnx.load(path, load_external_data=False).graph
    assert [i.name for i in graph.input] == ["head_ids", "input_ids", "positions"]
    # Per GDN layer: the head's recurrence (from zeros) hands its final state to the rows'.
    recurrences = [n for n in graph.node if n.op_type == "LinearAttention"]
    assert len(recurrences) % 2 == 0 and recurrences
    assert sum(1 for n in recurrences if n.input[3]) == len(recurrences) // 2


def test_a_baked_head_or_a_whole_sequence_readout_is_refused(qwen_tied):
    dims = TextDims.from_dir(qwen_tied)
    state = weights.load_text_state(qwen_tied, torch.float32)
    with pytest.raises(ValueError, match="shared head"):
        SharedHead(export.build_module(dims, state, "all"))
