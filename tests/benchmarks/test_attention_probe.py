"""benchmarks.gpu.attention_probe's CPU dry run: the bias graph is ONNX Runtime's
MultiHeadAttention with a packed rows' bias, and it agrees with numpy's attention; every case
at every batch row length is timed."""

from __future__ import annotations

import json

import numpy as np

from benchmarks.gpu import attention_probe


def test_each_length_is_timed_and_the_bias_graph_is_numpys_attention(tmp_path):
    out = tmp_path / "attention.json"
    attention_probe.main(
        ["--device", "cpu", "--tokens", "256", "--lengths", "32,64", "--iters", "1", "--out", str(out)]
    )
    report = json.loads(out.read_text())
    cases = {(c["kind"], c["T"]) for c in report["cases"]}
    assert cases == {("matmul", None)} | {(k, t) for k in ("bias", "no_bias") for t in (32, 64)}
    assert all(c["wall_ms"] > 0 for c in report["cases"])
    for case in report["cases"]:
        if case["kind"] == "bias":
            assert case["B"] * case["T"] == 256
            assert case["max_abs_err"] < 1e-4, case


def test_the_bias_keeps_each_query_to_its_own_packed_row():
    bias = attention_probe._segment_bias(attention_probe._segments(3, 64, np.random.default_rng(1)), 64, np.float32)
    for b in range(3):
        open_ = bias[b, 0] == 0.0
        assert (open_ == open_.T).all()  # a row's tokens see each other, symmetrically
        rows = [i for i in range(64) if open_[i].any()]
        assert rows and all(open_[i, i] for i in rows)  # every placed token sees itself
        assert not open_[[i for i in range(64) if i not in rows]].any()  # padding sees nothing


def test_the_packed_layout_lists_real_tokens_first_then_padding():
    offset, cu = attention_probe._packed_layout([3, 1, 2])
    assert cu.tolist() == [0, 3, 4, 6]
    # padded [3, 3]: real tokens at 0, 1, 2 | 3 | 6, 7, in packed order, then the padded slots
    assert offset.tolist() == [[0, 1, 2], [3, 6, 7], [4, 5, 8]]
    assert offset.dtype == np.int32 and cu.dtype == np.int32
