"""benchmarks.gpu.pass_probe's CPU dry run: the executor's steps on a GraphRunner, captured below
the graph-rows bound and uncaptured above it, each stage timed and adding up to the pass."""
from __future__ import annotations

import json

from benchmarks.gpu import pass_probe


def test_stages_add_up_to_the_pass(english, tmp_path, monkeypatch):
    monkeypatch.setenv("OMNI_CUDA_GRAPH_ROWS", "2")
    out = tmp_path / "probe.json"
    pass_probe.main(["--export", english[1], "--device", "cpu", "--rows", "1,2,3", "--iters", "3",
                     "--warmup", "1", "--out", str(out)])
    report = json.loads(out.read_text())
    assert report["graph_rows"] == 2
    cases = report["cases"]
    assert [cases[n]["captured"] for n in ("1", "2", "3")] == [True, True, False]
    assert cases["3"]["shape"][0] == 3 and cases["2"]["shape"][0] == 2     # uncaptured: its own rows
    assert cases["1"]["replay_max_abs_diff"] == cases["2"]["replay_max_abs_diff"] == 0.0
    assert "replay_max_abs_diff" not in cases["3"]
    for case in cases.values():
        p50 = case["p50_ms"]
        parts = sum(p50[k] for k in ("pack", "feeds_in", "run", "outputs_out", "unpack"))
        assert p50["pass"] > 0 and abs(parts - p50["pass"]) <= 0.5 * p50["pass"], p50


def test_a_workload_file_sets_the_rows_lengths(english, tmp_path, monkeypatch):
    from benchmarks.make_workloads import HERE

    monkeypatch.setenv("OMNI_CUDA_GRAPH_ROWS", "0")      # uncaptured: the batch's own shape

    out = tmp_path / "probe.json"
    pass_probe.main(["--export", english[1], "--device", "cpu", "--rows", "1,3", "--iters", "2",
                     "--warmup", "1", "--workload", HERE + "/laya_48.jsonl", "--out", str(out)])
    cases = json.loads(out.read_text())["cases"]
    assert cases["3"]["shape"] == [3, 48] and not cases["3"]["captured"]   # 48 tokens, unpadded


def test_a_shape_whose_capture_failed_is_reported_not_captured(english, tmp_path, monkeypatch):
    """Bucketed for capture is not captured: where the capture fails (ONNX Runtime refusing it,
    as for GemmFloat8 graphs on the H200), the shape runs uncaptured and the report says so."""
    from app.runtime import sessions

    def refuse(*args, **kwargs):
        raise RuntimeError("this graph cannot be captured")

    monkeypatch.setenv("OMNI_CUDA_GRAPH_ROWS", "2")
    monkeypatch.setattr(sessions, "Captured", refuse)
    out = tmp_path / "probe.json"
    pass_probe.main(["--export", english[1], "--device", "cpu", "--rows", "1", "--iters", "2",
                     "--warmup", "1", "--out", str(out)])
    case = json.loads(out.read_text())["cases"]["1"]
    assert case["bucketed"] and not case["captured"] and "replay_max_abs_diff" not in case
    p50 = case["p50_ms"]
    assert 0 < p50["run"] <= p50["pass"] and p50["unpack"] < p50["run"]     # the uncaptured run, timed as one
