"""Packed Laya passes: several question rows share a batch row (LayaAdapter.bins), and each is
answered as it is alone, by the torch graph in both attention modes and by the exported graph
through the adapter (tests/app/test_executor.py::test_answers_are_the_same_alone_or_batched)."""

from __future__ import annotations

import numpy as np
import pytest

from models.laya.adapter import INPUTS, LayaAdapter, static_rows
from models.laya.prepare import Row


def _rows(lengths, seed=0, vocab=300):
    rng = np.random.default_rng(seed)
    return [
        Row([int(x) for x in rng.integers(5, vocab, n)], list(range(1, min(n, 7), 2)) or [0], i % 3)
        for i, n in enumerate(lengths)
    ]


@pytest.mark.parametrize("seed", range(25))
def test_bins_place_every_row_once_within_a_width_that_pays(seed):
    rng = np.random.default_rng(seed)
    lengths = [int(n) for n in rng.integers(1, 513, int(rng.integers(1, 80)))]
    adapter = LayaAdapter(0, {}, max_len=512)
    width, placed = adapter.bins(lengths)
    assert sorted(i for b in placed for i in b) == list(range(len(lengths)))
    assert width >= max(lengths) and width % 16 == 0 and width <= 512
    assert all(sum(lengths[i] for i in b) <= width for b in placed)
    # Never more batch tokens than a row a batch row at the longest row's length.
    assert width * len(placed) <= len(lengths) * -(-max(lengths) // 16) * 16
    assert adapter.padded_tokens([_rows(lengths)]) == width * len(placed)


def test_rows_of_like_length_pack_one_a_batch_row():
    width, placed = LayaAdapter(0, {}).bins([100, 97, 90])
    assert width == 112 and sorted(map(len, placed)) == [1, 1, 1]
    width, placed = LayaAdapter(0, {}).bins([300, 20, 30, 200, 10])
    assert (width, len(placed)) == (304, 2)  # 560 tokens in two batch rows, not five
    width, placed = LayaAdapter(0, {}).bins([40, 30, 20, 20, 10, 5])
    assert (width, len(placed)) == (128, 1)  # one batch row of 128 tokens, not three of 48


def test_pack_places_rows_side_by_side_and_indexes_them_flat():
    rows = _rows([30, 10, 12, 25])
    packed = LayaAdapter(0, {}, max_len=64).pack([rows[:2], rows[2:]])
    f = packed.feeds
    assert list(f) == list(INPUTS)
    b, t = f["input_ids"].shape
    assert packed.rows == 4 and b < 4 and packed.padded_tokens == b * t and packed.real_tokens == 77
    flat = {name: f[name].reshape(-1) for name in ("input_ids", "segments", "positions", "qtype")}
    for i, r in enumerate(rows):
        at = int(f["starts"][i])
        span = slice(at, at + len(r.ids))
        assert flat["input_ids"][span].tolist() == r.ids
        assert flat["positions"][span].tolist() == list(range(len(r.ids)))  # its own positions
        assert len(set(flat["segments"][span].tolist())) == 1 and flat["segments"][at] > 0
        assert set(flat["qtype"][span].tolist()) == {r.qtype}
        k = len(r.markers)
        assert (f["marker_pos"][i, :k] == at + np.array(r.markers)).all() and f["marker_mask"][i, :k].all()
        assert not f["marker_mask"][i, k:].any()
    # Rows sharing a batch row have different segment numbers; padding is segment 0.
    assert (flat["segments"] == 0).sum() == b * t - 77


def test_a_bucketed_pack_holds_one_row_a_batch_row_and_filler_rows():
    rows = _rows([30, 10, 12])
    packed = LayaAdapter(0, {}, max_len=64).pack([rows], static=True)
    f = packed.feeds
    assert f["input_ids"].shape[0] == static_rows(3) == f["starts"].shape[0] == packed.rows
    assert f["starts"].tolist() == [i * f["input_ids"].shape[1] for i in range(4)]
    assert (f["segments"][3] == 0).all() and not f["marker_mask"][3].any()


torch = pytest.importorskip("torch")


@pytest.mark.parametrize("attention", ["sdpa", "mha"])
def test_packed_rows_answer_as_each_alone_in_the_graph(attention):
    from models.laya.graph import LayaDecisionGraph, build_encoder, scale_like_trained
    from tests.models.laya.test_encoder import CONFIG

    torch.manual_seed(0)
    model = LayaDecisionGraph(build_encoder(CONFIG), head_layers=2, n_act=2, attention=attention)
    scale_like_trained(model, seed=0)
    model.eval()
    adapter = LayaAdapter(0, {}, max_len=64)
    # Rows longer than the sliding window (8), packed three and two to a batch row.
    rows = _rows([37, 9, 20, 14, 3])

    def run(works):
        feeds = adapter.pack(works).feeds
        with torch.no_grad():
            return [t.numpy() for t in model(*(torch.from_numpy(feeds[n]) for n in INPUTS))], feeds

    (logits, act), feeds = run([rows])
    assert feeds["input_ids"].shape[0] < len(rows)  # rows did share batch rows
    for i, r in enumerate(rows):
        (alone, alone_act), _ = run([[r]])
        k = len(r.markers)
        np.testing.assert_allclose(logits[i, :k], alone[0, :k], atol=2e-5, rtol=0)
        np.testing.assert_allclose(act[i], alone_act[0], atol=2e-5, rtol=0)
