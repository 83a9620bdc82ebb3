"""benchmarks.gpu.layer_ops_probe's CPU dry run: every form of a Laya layer's GELU, rotary, split
and projections computes numpy's result (GELU with erf, rotary in adjacent pairs), at every
token count; a form the CPU kernels lack is recorded with its error, not dropped."""

from __future__ import annotations

import json

import numpy as np

from benchmarks.gpu import layer_ops_probe


def test_each_form_is_numpys_result_at_each_size(tmp_path):
    out = tmp_path / "ops.json"
    layer_ops_probe.main(["--device", "cpu", "--shapes", "1x16,2x24", "--out", str(out)])
    report = json.loads(out.read_text())
    names = {c["case"] for c in report["cases"]}
    assert {"gelu", "gelu_onnx", "bias_gelu", "gelu_mul", "rotary_qkv", "rotary_qk", "split_qkv", "matmul_v"} <= names
    for tokens in (16, 48):
        rows = [c for c in report["cases"] if c["tokens"] == tokens]
        assert len(rows) == len(names)
        for row in rows:
            if row["case"] == "bias_split_gelu":  # CUDA kernels only
                assert "BiasSplitGelu" in row["error"]
                continue
            assert "error" not in row, row
            assert row["max_abs_err"] < 1e-4, row


def test_the_rotary_reference_turns_pairs_and_passes_the_rest():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 3, 8))  # 2 blocks of 4: the first 2 of each turn, the last 2 pass
    pos = np.array([[0, 1, 2]])
    cos, sin = np.cos([[0.0], [np.pi / 2], [np.pi]]), np.sin([[0.0], [np.pi / 2], [np.pi]])
    got = layer_ops_probe._rotary(x, pos, cos, sin, heads=2, rotated=2)
    assert np.allclose(got[0, 0], x[0, 0])  # angle 0
    a, b = x[0, 1, 0], x[0, 1, 1]
    assert np.allclose(got[0, 1, :2], [-b, a])  # a quarter turn
    assert np.allclose(got[0, 2, :2], -x[0, 2, :2])  # a half turn
    assert np.allclose(got[..., [2, 3, 6, 7]], x[..., [2, 3, 6, 7]])
