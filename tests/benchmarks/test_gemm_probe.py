"""benchmarks.gpu.gemm_probe's CPU dry run: each form's graph computes numpy's products, every
shape at every row count is timed, and the one-row pass's total weighs each by its count."""
from __future__ import annotations

import json

import pytest

from benchmarks.gpu import gemm_probe


def test_each_shape_is_checked_timed_and_weighed(tmp_path):
    out = tmp_path / "gemm.json"
    gemm_probe.main(["--device", "cpu", "--dims", "tiny", "--rows", "8,24", "--forms", "matmul3d,gemm_t,nbits8,nbits4",
                     "--copies", "2", "--iters", "2", "--out", str(out)])
    results = json.loads(out.read_text())
    shapes = gemm_probe.SHAPES["tiny"]
    timed = [r for r in results if "ms" in r]
    assert {(r["rows"], r["form"], r["k"], r["n"]) for r in timed} == {
        (rows, form, k, n) for rows in (8, 24) for form in ("matmul3d", "gemm_t", "nbits8", "nbits4") for k, n in shapes}
    assert all(r["ms"] > 0 for r in timed)
    for total in (r for r in results if "predicted_model_ms" in r):
        parts = [r for r in timed if (r["rows"], r["form"]) == (total["rows"], total["form"])]
        assert total["predicted_model_ms"] == pytest.approx(
            sum(r["ms"] * shapes[(r["k"], r["n"])] for r in parts), abs=1e-3)


def test_the_torch_forms_need_the_gpu():
    with pytest.raises(SystemExit, match="ONNX Runtime's forms only"):
        gemm_probe.main(["--device", "cpu", "--dims", "tiny", "--rows", "8", "--forms", "torch_mm"])
