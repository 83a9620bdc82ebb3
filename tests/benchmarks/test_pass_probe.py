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
