"""benchmarks.gpu.gemm_probe's CPU dry run: each form's graph computes numpy's products, every
shape at every row count is timed, and the one-row pass's total weighs each by its count."""

from __future__ import annotations

import json

import pytest

from benchmarks.gpu import gemm_probe


def test_each_shape_is_checked_timed_and_weighed(tmp_path):
    out = tmp_path / "gemm.json"
    gemm_probe.main(
        [
            "--device",
            "cpu",
            "--dims",
            "tiny",
            "--rows",
            "8,24",
            "--forms",
            "matmul3d,gemm_t",
            "--copies",
            "2",
            "--iters",
            "2",
            "--out",
            str(out),
        ]
    )
    results = json.loads(out.read_text())
    shapes = gemm_probe.SHAPES["tiny"]
    timed = [r for r in results if "ms" in r]
    assert {(r["rows"], r["form"], r["k"], r["n"]) for r in timed} == {
        (rows, form, k, n) for rows in (8, 24) for form in ("matmul3d", "gemm_t") for k, n in shapes
    }
    assert all(r["ms"] > 0 for r in timed)
    for total in (r for r in results if "predicted_model_ms" in r):
        parts = [r for r in timed if (r["rows"], r["form"]) == (total["rows"], total["form"])]
        assert total["predicted_model_ms"] == pytest.approx(
            sum(r["ms"] * shapes[(r["k"], r["n"])] for r in parts), abs=1e-3
        )


def test_the_torch_forms_need_the_gpu():
    with pytest.raises(SystemExit, match="ONNX Runtime's forms only"):
        gemm_probe.main(["--device", "cpu", "--dims", "tiny", "--rows", "8", "--forms", "torch_mm"])


@pytest.mark.parametrize("form", gemm_probe.FP8_FORMS)
def test_the_fp8_forms_are_well_formed_graphs_that_need_the_gpu(form):
    """ONNX Runtime has no CPU kernel for its FP8 products at fp16, so the dry run refuses them;
    their graphs still check, with the E4M3 weights ONNX Runtime reads on the GPU."""
    import onnx

    model = onnx.load_from_string(gemm_probe.onnx_products(8, 128, 256, 2, form))
    onnx.checker.check_model(model)
    ops = [node.op_type for node in model.graph.node]
    assert ops.count("GemmFloat8" if form == "gemm8" else "MatMulBlockQuantizedFp8Weight") == 2
    weights = [t for t in model.graph.initializer if t.name in ("w0", "w1")]
    assert [t.data_type for t in weights] == [onnx.TensorProto.FLOAT8E4M3FN] * 2
    assert [list(t.dims) for t in weights] == [[256, 128]] * 2  # [N, K], as both ops take them
    if form == "gemm8":
        assert ops[0] == "QuantizeLinear"  # one cast for both products
    with pytest.raises(SystemExit, match="needs the GPU"):
        gemm_probe.main(["--device", "cpu", "--dims", "tiny", "--rows", "8", "--forms", form])


def test_the_fp8_references_round_what_the_kernels_round():
    import numpy as np

    from benchmarks.gpu import weight_fp8

    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 256)).astype(np.float32), gemm_probe.weights(256, 64, 1)[0]
    exact = x @ w.astype(np.float32)
    for form in ("fp8w", "fp8w_a8", "gemm8"):
        got = gemm_probe.reference_products(x, w, form)
        assert 0 < np.abs(got - exact).max() / np.abs(exact).max() < 0.1
    # W8A16 keeps the activation; W8A8 rounds it through E4M3 at the probe's scale.
    assert np.array_equal(gemm_probe.reference_products(x, w, "fp8w"), x @ gemm_probe.reference_weight(w, "fp8w"))
    rounded = weight_fp8.round_activation(x, gemm_probe.ACT_SCALE)
    assert np.array_equal(
        gemm_probe.reference_products(x, w, "fp8w_a8"), rounded @ gemm_probe.reference_weight(w, "fp8w")
    )
    assert 0 < np.abs(rounded - x).max() <= np.abs(x).max() / 16
