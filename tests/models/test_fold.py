"""models.fold: constant weight transforms folded into the weights at export, the graph's answers
bit for bit the same, over real ONNX Runtime sessions and real external data files."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from models.fold import ALIGN, fold_weights


def _graph(path: str) -> None:
    """x [n, 32] fp16 through the layouts an export leaves: W's first 8 rows sliced and
    transposed (F.linear over a slice), W's rows gathered in a new order and transposed (read by
    two products), a Cast of a constant (arithmetic: left for ONNX Runtime), and a Gemm that
    reads W as it is (so W stays)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 32)).astype(np.float16)
    order = np.array([3, 1, 2, 0, 7, 5, 6, 4], np.int64)
    inits = [
        numpy_helper.from_array(w, "W"),
        numpy_helper.from_array(order, "order"),
        numpy_helper.from_array(np.array([0], np.int64), "s"),
        numpy_helper.from_array(np.array([8], np.int64), "e"),
        numpy_helper.from_array(np.array([0.5] * 8, np.float32), "scale32"),
    ]
    nodes = [
        helper.make_node("Slice", ["W", "s", "e"], ["w_slice"]),
        helper.make_node("Transpose", ["w_slice"], ["w_t"], perm=[1, 0]),
        helper.make_node("MatMul", ["x", "w_t"], ["a"]),
        helper.make_node("Gather", ["W", "order"], ["w_perm"], axis=0),
        helper.make_node("Transpose", ["w_perm"], ["w_perm_t"], perm=[1, 0]),
        helper.make_node("MatMul", ["x", "w_perm_t"], ["b"]),
        helper.make_node("MatMul", ["x", "w_perm_t"], ["b2"]),
        helper.make_node("Cast", ["scale32"], ["scale16"], to=TensorProto.FLOAT16),
        helper.make_node("Mul", ["b2", "scale16"], ["b3"]),
        helper.make_node("Add", ["a", "b"], ["ab"]),
        helper.make_node("Add", ["ab", "b3"], ["y"]),
        helper.make_node("Gemm", ["x", "W"], ["z"], transB=1),  # W itself stays, for this
    ]
    graph = helper.make_graph(
        nodes,
        "layouts",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["n", 32])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["n", 8]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT16, ["n", 64]),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    onnx.save(model, path, save_as_external_data=True, location="model.onnx.data")


def _run(path: str, x: np.ndarray) -> list:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # no folding of its own
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"]).run(None, {"x": x})


@pytest.mark.parametrize("release", [False, True])
def test_folding_keeps_the_answers_and_leaves_no_constant_layout_work(tmp_path, release):
    path = str(tmp_path / "model.onnx")
    _graph(path)
    x = np.random.default_rng(1).standard_normal((3, 32)).astype(np.float16)
    before = _run(path, x)

    assert fold_weights(path, release=release) == 4  # Slice, Transpose; Gather, Transpose

    model = onnx.load(path, load_external_data=False)
    ops = [n.op_type for n in model.graph.node]
    assert "Slice" not in ops and "Transpose" not in ops
    assert "Gather" not in ops and ops.count("Cast") == 1 and ops.count("Gemm") == 1  # arithmetic stays
    after = _run(path, x)
    for a, b in zip(before, after):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    names = {t.name for t in model.graph.initializer}
    assert {"w_t", "w_perm_t", "W"} <= names and not {"w_slice", "w_perm", "order", "s", "e"} & names
    # One data file, every external tensor at an aligned offset, nothing left from the rewrite.
    assert sorted(os.listdir(tmp_path)) == ["model.onnx", "model.onnx.data"]
    for tensor in model.graph.initializer:
        if tensor.data_location == tensor.EXTERNAL:
            entries = {e.key: e.value for e in tensor.external_data}
            assert entries["location"] == "model.onnx.data" and int(entries["offset"]) % ALIGN == 0
    assert numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "w_t"), str(tmp_path)).shape == (
        32,
        8,
    )


def test_a_graph_with_nothing_to_fold_is_left_alone(tmp_path):
    path = str(tmp_path / "model.onnx")
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0])],
        "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10), path)
    stamp = os.path.getmtime(path)
    assert fold_weights(path) == 0
    assert os.path.getmtime(path) == stamp and os.listdir(tmp_path) == ["model.onnx"]


def test_the_command_folds_an_export_in_place_and_records_it(tmp_path, capsys):
    import json

    from models import fold, manifest

    _graph(str(tmp_path / "model.onnx"))
    before = manifest.sha256_file(str(tmp_path / "model.onnx"))
    data_before = manifest.sha256_file(str(tmp_path / "model.onnx.data"))
    manifest.write(
        str(tmp_path),
        {"name": "old", "onnx": "model.onnx", "files": {"model.onnx": before, "model.onnx.data": data_before}},
    )
    x = np.random.default_rng(2).standard_normal((2, 32)).astype(np.float16)
    answers = _run(str(tmp_path / "model.onnx"), x)

    assert fold.main([str(tmp_path)]) == 0
    meta = json.loads((tmp_path / "manifest.json").read_text())
    assert meta["weights_folded"] is True
    assert meta["files"]["model.onnx"] == manifest.sha256_file(str(tmp_path / "model.onnx")) != before
    # The folded weights here are small enough to sit in the graph: the data file holds W alone, as before.
    assert meta["files"]["model.onnx.data"] == manifest.sha256_file(str(tmp_path / "model.onnx.data")) == data_before
    assert all(np.array_equal(a, b) for a, b in zip(answers, _run(str(tmp_path / "model.onnx"), x)))
    assert fold.main([str(tmp_path)]) == 0  # again: nothing left, and it says so
    assert capsys.readouterr().out.splitlines() == [
        "%s: 4 weight transforms folded" % tmp_path,
        "%s: nothing left to fold" % tmp_path,
    ]


def test_a_fold_that_fails_halfway_leaves_the_export_as_it_was(tmp_path, monkeypatch):
    """Without `release` (an export already in use) a failure changes nothing on disk."""
    from models import fold, manifest

    path = str(tmp_path / "model.onnx")
    _graph(path)
    hashes = {n: manifest.sha256_file(str(tmp_path / n)) for n in os.listdir(tmp_path)}
    real, calls = fold._run, []

    def failing(node, args):
        calls.append(node.op_type)
        if len(calls) == 3:
            raise RuntimeError("disk full")
        return real(node, args)

    monkeypatch.setattr(fold, "_run", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        fold_weights(path)
    assert {n: manifest.sha256_file(str(tmp_path / n)) for n in os.listdir(tmp_path)} == hashes


def test_bfloat16_weights_are_moved_bit_for_bit(tmp_path):
    """bfloat16 (no numpy type of its own) is folded as raw 16-bit values: the folded weight is
    exactly the transposed bits, and stays bfloat16."""
    bits = np.random.default_rng(3).integers(0, 1 << 16, (64, 32), dtype=np.uint16)
    w = helper.make_tensor("W", TensorProto.BFLOAT16, [64, 32], bits.tobytes(), raw=True)
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["W"], ["w_t"], perm=[1, 0]), helper.make_node("MatMul", ["x", "w_t"], ["y"])],
        "bf16",
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, ["n", 64])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, ["n", 32])],
        [w],
    )
    path = str(tmp_path / "model.onnx")
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10),
        path,
        save_as_external_data=True,
        location="model.onnx.data",
    )
    assert fold_weights(path, release=True) == 1
    model = onnx.load(path, load_external_data=False)
    (tensor,) = model.graph.initializer
    assert tensor.name == "w_t" and tensor.data_type == TensorProto.BFLOAT16 and list(tensor.dims) == [32, 64]
    from onnx.external_data_helper import load_external_data_for_tensor

    load_external_data_for_tensor(tensor, str(tmp_path))
    assert np.array_equal(np.frombuffer(tensor.raw_data, np.uint16).reshape(32, 64), bits.T)


def same_graph(a: str, b: str) -> int:
    """Assert the ONNX graphs at `a` and `b` have the same nodes, in order, and the same
    initializers, byte for byte; returns how many initializers they hold."""
    ga, gb = onnx.load(a).graph, onnx.load(b).graph

    def nodes(g):
        return [(n.op_type, n.domain, list(n.input), list(n.output), [str(x) for x in n.attribute]) for n in g.node]

    assert nodes(ga) == nodes(gb)
    ia, ib = (
        {t.name: (t.data_type, list(t.dims), numpy_helper.to_array(t).tobytes()) for t in g.initializer}
        for g in (ga, gb)
    )
    assert ia == ib
    return len(ia)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.slow
def test_folding_as_the_save_writes_gives_the_file_folds_graph(english, tmp_path, monkeypatch, dtype):
    """fold_lazily (the exporters' fold, before the save) folds what fold_weights folds, into the
    same initializers under the same names, so fold_weights finds nothing left after it; and the
    graph is the one the file fold alone writes (a Laya export: slices, gathers and transposes)."""
    import models.fold as fold_module
    from models.laya import export

    folded_by_file = []
    real = fold_module.fold_weights
    monkeypatch.setattr(fold_module, "fold_weights", lambda *a, **k: folded_by_file.append(real(*a, **k)) or 0)
    export.export(english[0], str(tmp_path / "lazy"), dtype=dtype, progress=None, force=True)
    assert folded_by_file == [0]
    monkeypatch.setattr(fold_module, "fold_lazily", lambda model: 0)
    export.export(english[0], str(tmp_path / "file"), dtype=dtype, progress=None, force=True)
    assert folded_by_file[1] > 0
    assert same_graph(str(tmp_path / "lazy" / "model.onnx"), str(tmp_path / "file" / "model.onnx")) > 10


@pytest.mark.parametrize("shape", [(1, 5), (300, 257), (129, 128), (2048, 1536)])
@pytest.mark.parametrize("dtype", [np.float16, np.uint16, np.float32, np.int64])
def test_the_matrix_transpose_is_numpys(shape, dtype):
    """The striped, threaded transpose the fold uses for 2-D weights gives numpy's transpose,
    element for element, at any shape (stripes that do not divide the rows, one row) and width
    (bfloat16 weights are folded as uint16); large ones go through the thread pool."""
    from models.fold import _transpose2d

    a = np.random.default_rng(1).integers(0, 1 << 15, size=shape).astype(dtype)
    got = _transpose2d(a)
    assert got.flags.c_contiguous and got.dtype == a.dtype
    np.testing.assert_array_equal(got, a.T)
