"""GraphRunner's capture policy and batch_runner's choice, over real ONNX Runtime CPU sessions
(the capture itself needs a GPU: benchmarks/gpu measures it; here the binding, the sighting
count, the cap and the in-place updates of replayed shapes run for real)."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from app.runtime import sessions


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """y = x * 2 + 1 over any [rows, length] float input."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", "length"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", "length"])
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["x2"]), helper.make_node("Add", ["x2", "one"], ["y"])],
        "affine", [x], [y],
        [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]), helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    path = tmp_path_factory.mktemp("graph") / "affine.onnx"
    onnx.save(model, str(path))
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _feeds(rows, length, seed):
    return {"x": np.random.default_rng(seed).standard_normal((rows, length)).astype(np.float32)}


def test_a_shape_is_captured_on_its_nth_sighting_then_replayed_with_new_data(session):
    runner = sessions.GraphRunner(session, 0, max_graphs=8, capture_after=3, device="cpu")
    for seed in range(5):
        feeds = _feeds(2, 16, seed)
        (y,) = runner.run(None, feeds)
        np.testing.assert_array_equal(y, feeds["x"] * 2 + 1)        # the data of this run, not a stale one
        assert len(runner.graphs) == (1 if seed >= 2 else 0)          # sightings 1 and 2 run uncaptured
    assert runner.sightings == {}
    runner.run(None, _feeds(4, 16, 9))                                # another shape: counted from one
    assert len(runner.graphs) == 1 and list(runner.sightings.values()) == [1]


def test_first_sight_capture_and_the_cap(session):
    runner = sessions.GraphRunner(session, 0, max_graphs=2, device="cpu")
    for length in (8, 16, 32, 32):
        feeds = _feeds(1, length, length)
        (y,) = runner.run(None, feeds)
        np.testing.assert_array_equal(y, feeds["x"] * 2 + 1)
    # 8 and 16 took the two graphs; 32 runs uncaptured past the cap, and is not even counted.
    assert sorted(key[0][1] for key in runner.graphs) == [(1, 8), (1, 16)]
    assert runner.sightings == {}


@pytest.mark.parametrize("rows, tokens, graph_tokens, static", [
    (4, 4 * 224, 1024, True),       # small: bucketed, may replay
    (8, 8 * 224, 1024, False),      # more tokens than the bound: own shapes, uncaptured
    (8, 8 * 224, 0, True),          # no token bound (Laya): only the row bound counts
    (32, 32 * 48, 0, False),        # more rows than the bound
])
def test_batch_runner_bounds(session, rows, tokens, graph_tokens, static):
    runner = sessions.GraphRunner(session, 0, max_graphs=8, device="cpu")
    got, run = sessions.batch_runner(runner, True, rows, 16, tokens, graph_tokens)
    assert got is static
    assert run == (runner.run if static else runner.run_uncaptured)
    assert sessions.batch_runner(session, False, rows, 16, tokens, graph_tokens) == (False, session.run)


def test_gdn_plan_is_set_only_while_a_session_is_built(monkeypatch):
    """ORT_GDN_PLAN carries the configured GatedDeltaNet engine into ONNX Runtime while a session
    is built, and the process's own value (or its absence) comes back afterwards."""
    import os

    from app.config import Settings

    monkeypatch.delenv("ORT_GDN_PLAN", raising=False)
    with sessions.gdn_engine("chunked_split"):
        assert os.environ["ORT_GDN_PLAN"] == "chunked_split"
    assert "ORT_GDN_PLAN" not in os.environ
    monkeypatch.setenv("ORT_GDN_PLAN", "recurrent")
    with sessions.gdn_engine("auto"):
        assert "ORT_GDN_PLAN" not in os.environ            # auto: ONNX Runtime's own heuristic
    assert os.environ["ORT_GDN_PLAN"] == "recurrent"
    assert Settings().cuda_gdn_plan == "chunked_split"
    assert Settings.from_env({"OMNI_CUDA_GDN_PLAN": "auto"}).cuda_gdn_plan == "auto"
    with pytest.raises(ValueError, match="cuda_gdn_plan"):
        Settings(cuda_gdn_plan="fast")
