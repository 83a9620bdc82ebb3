"""GraphRunner's capture bookkeeping and batch_runner's choice, over real ONNX Runtime CPU sessions
(the capture itself needs a GPU: benchmarks/gpu measures it; here the binding, the sighting
count, the candidates, the cap and the in-place updates of replayed shapes run for real)."""

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
        "affine",
        [x],
        [y],
        [
            helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
            helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    path = tmp_path_factory.mktemp("graph") / "affine.onnx"
    onnx.save(model, str(path))
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _feeds(rows, length, seed):
    return {"x": np.random.default_rng(seed).standard_normal((rows, length)).astype(np.float32)}


def test_a_shape_is_due_on_its_nth_sighting_captured_apart_then_replayed_with_new_data(session):
    """`run` never captures: sightings run uncaptured, the capture_after-th makes the shape a
    candidate (with its own copy of the feeds), `capture` takes its graph, and replays answer each
    run's own data, as the uncaptured runs did."""
    runner = sessions.GraphRunner(session, 0, max_graphs=8, capture_after=3, device="cpu")
    key = runner.shape_key(_feeds(2, 16, 0))
    for seed in range(4):
        feeds = _feeds(2, 16, seed)
        (y,) = runner.run(None, feeds)
        np.testing.assert_array_equal(y, feeds["x"] * 2 + 1)
        assert runner.graphs == {} and runner.capture_s == 0
        assert list(runner.pending) == ([key] if seed >= 2 else [])
    assert runner.sightings == {key: 4}
    due = runner.pending[key]
    np.testing.assert_array_equal(due["x"], _feeds(2, 16, 2)["x"])  # a copy of the third run's
    took = runner.capture(due)
    assert took > 0 and list(runner.graphs) == [key] and runner.pending == {} and runner.sightings == {}
    for seed in range(10, 13):
        feeds = _feeds(2, 16, seed)
        (y,) = runner.run(None, feeds)  # replayed
        np.testing.assert_array_equal(y, feeds["x"] * 2 + 1)
    assert runner.capture(due) is None and len(runner.graphs) == 1  # captured already
    runner.run(None, _feeds(4, 16, 9))  # another shape: counted from one
    assert len(runner.graphs) == 1 and list(runner.sightings.values()) == [1]


def test_captured_and_uncaptured_answers_are_identical(session):
    runner = sessions.GraphRunner(session, 0, max_graphs=8, device="cpu")
    feeds = [_feeds(3, 8, seed) for seed in range(3)]
    before = [runner.run(None, f)[0] for f in feeds]
    runner.capture(runner.pending[runner.shape_key(feeds[0])])
    after = [runner.run(None, f)[0] for f in feeds]
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)


def test_listed_shapes_wait_their_turn_and_the_cap_ends_counting(session):
    runner = sessions.GraphRunner(session, 0, max_graphs=2, device="cpu")
    runner.want(_feeds(1, 8, 0))  # a shape the model lists, not yet seen
    for length in (16, 32, 32):
        feeds = _feeds(1, length, length)
        (y,) = runner.run(None, feeds)
        np.testing.assert_array_equal(y, feeds["x"] * 2 + 1)
    assert [key[0][1] for key in runner.pending] == [(1, 8), (1, 16), (1, 32)]  # in the order due
    runner.capture(runner.pending[next(iter(runner.pending))])
    runner.capture(runner.pending[next(iter(runner.pending))])
    # 8 and 16 took the two graphs; 32 runs uncaptured past the cap, no longer counted or due.
    assert sorted(key[0][1] for key in runner.graphs) == [(1, 8), (1, 16)]
    assert runner.sightings == {} and runner.pending == {}
    assert runner.capture(_feeds(1, 32, 0)) is None and not runner.takes(_feeds(1, 32, 0))
    runner.run(None, _feeds(1, 64, 0))
    assert runner.sightings == {} and runner.pending == {}


class RefusesCapture:
    """The real session, except that a run naming a CUDA graph id fails, as ONNX Runtime's does
    for a graph it cannot capture (the capture itself needs a GPU)."""

    def __init__(self, session):
        self.session = session

    def __getattr__(self, name):
        return getattr(self.session, name)

    def run_with_iobinding(self, io, options=None):
        if options is not None and int(options.get_run_config_entry("gpu_graph_id")) > 0:
            raise RuntimeError("operation not permitted when stream is capturing")
        return self.session.run_with_iobinding(io, options)


def test_a_shape_whose_capture_fails_runs_uncaptured_from_then_on(session, caplog):
    runner = sessions.GraphRunner(RefusesCapture(session), 0, max_graphs=8, capture_after=2, device="cpu")
    with caplog.at_level("WARNING", logger="omni.sessions"):
        for seed in range(2):
            runner.run(None, _feeds(2, 16, seed))
        key = runner.shape_key(_feeds(2, 16, 0))
        assert runner.capture(runner.pending[key]) is None  # the capture fails
        for seed in range(2, 4):
            feeds = _feeds(2, 16, seed)
            (y,) = runner.run(None, feeds)
            np.testing.assert_array_equal(y, feeds["x"] * 2 + 1)
    assert runner.graphs == {} and runner.refused == {key} and runner.sightings == {} and runner.pending == {}
    assert [r.getMessage() for r in caplog.records if "capturing CUDA graph" in r.getMessage()] == [
        "capturing CUDA graph 1 failed; that shape runs uncaptured from now on (x[2, 16]): "
        "operation not permitted when stream is capturing"
    ]
    assert not runner.takes(_feeds(2, 16, 9)) and runner.takes(_feeds(4, 16, 9))  # others still count
    runner.want(_feeds(2, 16, 9))
    assert runner.pending == {}  # a refused shape is never due again
    assert runner.capture(_feeds(4, 16, 10)) is None  # another shape's capture gets a new graph id
    (y,) = runner.run(None, _feeds(4, 16, 10))
    np.testing.assert_array_equal(y, _feeds(4, 16, 10)["x"] * 2 + 1)
    assert "capturing CUDA graph 2 failed" in caplog.text and len(runner.refused) == 2


@pytest.mark.parametrize(
    "refusal",
    [
        "[ONNXRuntimeError] : 1 : FAIL : This session cannot use the CUDA Graph feature as requested by the user as "
        "the model has control flow nodes which can't be supported by CUDA Graphs.",
        "[ONNXRuntimeError] : 1 : FAIL : This session cannot use the graph capture feature as requested by the user  "
        "as all compute graph nodes have not been partitioned to the CUDAExecutionProvider",
    ],
)
def test_a_graph_onnx_runtime_will_not_capture_is_served_without_graphs(refusal, session, caplog):
    """ONNX Runtime fails a session's creation when CUDA graphs are enabled for a graph it cannot
    capture (both of its messages); the server then builds it without them rather than failing
    the model. Other failures still fail it."""
    asked = []

    def build(cuda):  # as ORT answers: the refusal with graphs on, a session without
        asked.append(dict(cuda))
        if cuda.get("enable_cuda_graph"):
            raise RuntimeError(refusal)
        return session

    cuda = {"device_id": 0, "enable_cuda_graph": "1"}
    with caplog.at_level("WARNING", logger="omni.sessions"):
        assert sessions.without_graphs_if_refused(build, cuda, "m.onnx") == (session, refusal[:300])
    assert asked == [{"device_id": 0, "enable_cuda_graph": "1"}, {"device_id": 0}] and cuda == {"device_id": 0}
    assert "m.onnx cannot be captured as CUDA graphs, so it runs without them" in caplog.text

    assert sessions.without_graphs_if_refused(lambda c: session, {"enable_cuda_graph": "1"}, "m.onnx") == (
        session,
        None,
    )

    def broken(cuda):
        raise RuntimeError("CUDA out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        sessions.without_graphs_if_refused(broken, {"enable_cuda_graph": "1"}, "m.onnx")
    with pytest.raises(RuntimeError, match="cannot use the"):  # graphs were not asked for
        sessions.without_graphs_if_refused(lambda c: build({"enable_cuda_graph": "1"}), {}, "m.onnx")


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """Three inputs of three dtypes and two outputs, as an export has: ids int64, a bool mask and
    float scores in; the masked sum of the scores (float32) and the ids' row sums (int64) out."""
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["scores", "maskf"], ["kept"]),
            helper.make_node("ReduceSum", ["kept", "axis"], ["total"], keepdims=0),
            helper.make_node("ReduceSum", ["ids", "axis"], ["id_sum"], keepdims=0),
        ],
        "mixed",
        [
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["rows", "length"]),
            helper.make_tensor_value_info("mask", TensorProto.BOOL, ["rows", "length"]),
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["rows", "length"]),
        ],
        [
            helper.make_tensor_value_info("total", TensorProto.FLOAT, ["rows"]),
            helper.make_tensor_value_info("id_sum", TensorProto.INT64, ["rows"]),
        ],
        [helper.make_tensor("axis", TensorProto.INT64, [1], [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    path = tmp_path_factory.mktemp("graph") / "mixed.onnx"
    onnx.save(model, str(path))
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_a_captured_shape_keeps_its_tensors_in_one_block_each_way(mixed):
    """A captured shape's inputs share one buffer (one copy in), its outputs another (one copy
    out), at 256-byte offsets; each replay's results are its own, not views a later replay
    overwrites."""
    runner = sessions.GraphRunner(mixed, 0, max_graphs=4, device="cpu")
    rng = np.random.default_rng(0)
    kept = []
    for i in range(4):
        feeds = {
            "ids": rng.integers(0, 1000, (3, 40)),
            "mask": rng.random((3, 40)) < 0.5,
            "scores": rng.standard_normal((3, 40)).astype(np.float32),
        }
        if i == 0:
            runner.capture(feeds)
        total, id_sum = runner.run(None, feeds)
        assert total.dtype == np.float32 and id_sum.dtype == np.int64 and total.shape == id_sum.shape == (3,)
        np.testing.assert_allclose(total, (feeds["scores"] * feeds["mask"]).sum(1), rtol=1e-6)
        np.testing.assert_array_equal(id_sum, feeds["ids"].sum(1))
        kept.append((total.copy(), id_sum.copy(), total, id_sum))
    for copy_total, copy_ids, total, id_sum in kept:  # later replays left them alone
        np.testing.assert_array_equal(total, copy_total)
        np.testing.assert_array_equal(id_sum, copy_ids)
    (entry,) = runner.graphs.values()
    assert entry.inputs.shape() == [1024 + 256 + 512]  # ids 960, mask 120 and scores 480 bytes, each rounded up
    assert [slot[2] for slot in entry.out_slots] == [0, 256]
    assert sessions._layout([(np.float16, (0, 4)), (np.int32, (2,))]) == (
        [(np.dtype(np.float16), (0, 4), 0, 0), (np.dtype(np.int32), (2,), 0, 8)],
        256,
    )


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
        assert "ORT_GDN_PLAN" not in os.environ  # auto: ONNX Runtime's own heuristic
    assert os.environ["ORT_GDN_PLAN"] == "recurrent"
    assert Settings().cuda_gdn_plan == "chunked_split"
    assert Settings.from_env({"OMNI_CUDA_GDN_PLAN": "auto"}).cuda_gdn_plan == "auto"
    with pytest.raises(ValueError, match="OMNI_CUDA_GDN_PLAN"):
        Settings(cuda_gdn_plan="fast")


def test_readiness_says_whether_each_model_replays_cuda_graphs_and_why_not():
    """/readyz's per-model `cuda_graphs`: "on" where the session replays them, "refused" with
    ONNX Runtime's reason where it would not capture the graph, "off" otherwise."""
    import types

    from app.routes.health import _model_status
    from app.runtime.registry import ModelSlot

    model = types.SimpleNamespace(name="m", aliases=(), manifest={}, limits=lambda: {})
    on, refused, off = (
        ModelSlot(model, static_shapes=True),
        ModelSlot(model, graphs_refused="no capture"),
        ModelSlot(model),
    )
    assert [s.cuda_graphs() for s in (on, refused, off)] == ["on", "refused", "off"]
    status = _model_status(refused)
    assert status["cuda_graphs"] == "refused" and status["cuda_graphs_refused"] == "no capture"
    assert "cuda_graphs_refused" not in _model_status(on) and _model_status(on)["cuda_graphs"] == "on"


def test_idle_captures_take_the_shape_seen_most_then_rest(session):
    """The batching policy's choice among candidates (app/runtime/batching.py): the shape traffic
    brought most often, the one due first among equals, across models; after a capture of t
    seconds none is due for 19·t."""
    from types import SimpleNamespace

    from app.runtime.batching import IdleCaptures

    a = sessions.GraphRunner(session, 0, max_graphs=8, device="cpu")
    b = sessions.GraphRunner(session, 0, max_graphs=8, capture_after=2, device="cpu")
    slots = [SimpleNamespace(session=a), SimpleNamespace(session=b), SimpleNamespace(session=object())]
    idle = IdleCaptures()
    assert idle.wait(slots, 0.0) is None and idle.pick(slots) is None  # nothing due
    a.want(_feeds(1, 8, 0))  # listed: due, never seen
    a.run(None, _feeds(1, 16, 0))  # seen once
    for seed in range(3):
        b.run(None, _feeds(2, 16, seed))  # seen three times, due since the second
    b.run(None, _feeds(4, 16, 0))  # seen once: not yet due on b
    assert idle.wait(slots, 0.0) == 0.0
    order = []
    while (due := idle.pick(slots)) is not None:
        slot, feeds = due
        order.append((slot.session is a, feeds["x"].shape))
        slot.session.capture(feeds)
    assert order == [(False, (2, 16)), (True, (1, 16)), (True, (1, 8))]
    idle.spent(0.1, 100.0)
    a.run(None, _feeds(3, 16, 0))
    assert idle.wait(slots, 100.0) == pytest.approx(1.9) and idle.wait(slots, 102.0) == 0.0


def test_a_float32_graph_runs_full_float32_products_on_cuda():
    """TF32 (ONNX Runtime's default) would give a float32 export float16's mantissa: a float32
    graph turns it off; a half-precision one keeps the provider's default."""
    assert sessions.cuda_options(1, 0, float32=True) == {
        "device_id": 1,
        "sdpa_kernel": str(sessions.SDPA_KERNELS),
        "use_tf32": "0",
    }
    half = sessions.cuda_options(0, 8, float32=False)
    assert "use_tf32" not in half and half["enable_cuda_graph"] == "1"


def test_the_executor_builds_a_float32_exports_session_as_float32(english, monkeypatch):
    """The executor tells sessions.create the export's dtype, from its manifest."""
    from tests.conftest import Harness

    seen = []
    real = sessions.create

    def create(*args, **kw):
        seen.append(kw.get("float32"))
        return real(*args, **kw)

    monkeypatch.setattr(sessions, "create", create)
    h = Harness([english[1]])
    try:
        assert seen == [True] and h.registry.slots[0].model.manifest.get("weights_dtype", "float32") == "float32"
    finally:
        h.close()
