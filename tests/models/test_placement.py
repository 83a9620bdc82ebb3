"""models.placement: shape values that meet data outside an op's host inputs are found; shape
values that reach only host inputs (a Reshape's shape, a Range's bounds) are not. ONNX Runtime
runs the first kind on the CPU and will not capture such a graph as CUDA graphs."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from models.placement import host_arithmetic


def _save(tmp_path, nodes, name="g.onnx"):
    x = helper.make_tensor_value_info("x", TensorProto.INT64, ["b", "t"])
    r = helper.make_tensor_value_info("r", TensorProto.INT64, ["q"])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, None)
    init = [
        numpy_helper.from_array(np.array([1], dtype=np.int64), "one"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "flat"),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x, r], [y], init), opset_imports=[helper.make_opsetid("", 18)]
    )
    path = str(tmp_path / name)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def test_a_size_times_data_is_found(tmp_path):
    # width = shape(x)[1]; y = r * width: the product runs on the CPU, then is copied over.
    path = _save(
        tmp_path,
        [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Gather", ["s", "one"], ["width"]),
            helper.make_node("Mul", ["r", "width"], ["y"], name="offset"),
        ],
    )
    assert host_arithmetic(path) == [{"op": "Mul", "node": "offset", "input": 1, "value": "width"}]


def test_sizes_that_reach_only_host_inputs_are_not(tmp_path):
    # positions = range(0, width, 1) and y = reshape(x, [-1]) compared with them: the sizes meet
    # data only through Range's bounds and Reshape's shape, which the kernels read on the host.
    path = _save(
        tmp_path,
        [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Gather", ["s", "one"], ["width"]),
            helper.make_node("Squeeze", ["width"], ["w"]),
            helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0, dtype=np.int64))),
            helper.make_node("Constant", [], ["step"], value=numpy_helper.from_array(np.array(1, dtype=np.int64))),
            helper.make_node("Range", ["zero", "w", "step"], ["positions"]),
            helper.make_node("Mul", ["s", "one"], ["s2"]),  # arithmetic on sizes alone
            helper.make_node("Reshape", ["x", "flat"], ["flat_x"]),
            helper.make_node("Expand", ["positions", "s2"], ["grid"]),
            helper.make_node("Add", ["grid", "x"], ["y"]),
        ],
    )
    assert host_arithmetic(path) == []


def test_exports_record_such_nodes_and_the_server_names_them_at_load(english, tmp_path):
    """Every export's manifest lists the nodes `host_arithmetic` finds (none for ours); an export
    that has some is named at load, with what it costs."""
    import json
    import os
    import shutil

    from models.manifest import read
    from models.registry import load

    assert read(english[1])["host_arithmetic"] == [] and load(english[1]).notes() == []
    copy = str(tmp_path / "copy")
    shutil.copytree(english[1], copy)
    meta = read(copy)
    meta["host_arithmetic"] = ["node_mul_7", "node_Div_9"]
    with open(os.path.join(copy, "manifest.json"), "w") as f:
        json.dump(meta, f)
    (note,) = load(copy).notes()
    assert "2 node(s) (node_mul_7, node_Div_9)" in note and "will not capture CUDA graphs" in note
