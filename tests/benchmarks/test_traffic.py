"""benchmarks.traffic: seeded traffic from an export's own limits, every request of it answered
by a real server."""

from __future__ import annotations

import json

import httpx

from benchmarks import traffic


def test_traffic_from_an_exports_limits_is_answered_whole(english, server, tmp_path):
    out = tmp_path / "t.jsonl"
    traffic.main(["--export", english[1], "--n", "48", "--seed", "60", "--out", str(out)])
    bodies = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(bodies) == 48
    again = tmp_path / "again.jsonl"
    traffic.main(["--export", english[1], "--n", "48", "--seed", "60", "--out", str(again)])
    assert again.read_text(encoding="utf-8") == out.read_text(encoding="utf-8")  # seeded
    kinds = [q["type"] for b in bodies for q in b["questions"].values()]
    assert set(kinds) == {"choice", "score", "noul"} and {len(b["questions"]) for b in bodies} == {1, 2, 3}
    words = sorted(len(b["state"].split(" ")) for b in bodies)
    assert words[0] < 10 and words[-1] > 40  # short and long states
    with httpx.Client(timeout=60) as client:
        replies = [client.post(server.url + "/v1/systemone", json=b) for b in bodies]
    assert [r.status_code for r in replies] == [200] * 48
    assert sum(len(r.json()["answers"]) for r in replies) == len(kinds)


def test_states_stay_under_the_models_token_limit():
    limits = {"question_types": ["choice"], "max_choice_options": 8, "max_prompt_tokens": 4096}
    bodies = traffic.traffic("m", limits, 400, seed=1)
    longest = max(len(b["state"].split(" ")) for b in bodies)
    assert longest <= (4096 - 256) // traffic.TOKENS_A_WORD
    assert all(2 <= len(q["criteria"]) <= 8 for b in bodies for q in b["questions"].values())


def test_dense_parameters_leave_out_tables_only_looked_up(tmp_path):
    """An embedding table (a Gather's data) costs no products; one also multiplied by (tied to
    the output head) does."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def graph(tied: bool):
        table = numpy_helper.from_array(np.zeros((50, 8), np.float32), "table")
        weight = numpy_helper.from_array(np.zeros((8, 4), np.float32), "weight")
        head = "table_t" if tied else "weight"
        nodes = [
            helper.make_node("Gather", ["table", "ids"], ["x"]),
            helper.make_node("MatMul", ["x", "weight"], ["h"]),
        ]
        if tied:
            nodes += [
                helper.make_node("Transpose", ["table"], ["table_t"]),
                helper.make_node("MatMul", ["x", head], ["y"]),
            ]
        out = "y" if tied else "h"
        g = helper.make_graph(
            nodes,
            "g",
            [helper.make_tensor_value_info("ids", TensorProto.INT64, [None])],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
            [table, weight],
        )
        return helper.make_model(g)

    for tied, want in ((False, 8 * 4), (True, 8 * 4 + 50 * 8)):
        d = tmp_path / ("tied" if tied else "untied")
        d.mkdir()
        onnx.save(graph(tied), str(d / "model.onnx"))
        (d / "manifest.json").write_text(json.dumps({"onnx": "model.onnx", "family": "laya"}))
        assert traffic.dense_parameters(str(d)) == want
