"""benchmarks.gpu.graph_cost_probe's CPU dry run: the shapes it is given, bucketed as the executor
buckets them, each run uncaptured and replayed on the executor's GraphRunner, timed."""

from __future__ import annotations

import json

from benchmarks.gpu import graph_cost_probe


def test_each_shape_is_bucketed_run_and_timed(english, tmp_path):
    out = tmp_path / "cost.json"
    graph_cost_probe.main(
        [
            "--export",
            english[1],
            "--device",
            "cpu",
            "--shapes",
            "1x48,3x100,12x200",
            "--iters",
            "2",
            "--settle",
            "0",
            "--out",
            str(out),
        ]
    )
    report = json.loads(out.read_text())
    shapes = report["shapes"]
    assert [s["shape"] for s in shapes] == [[1, 64], [4, 128], [12, 208]]  # row and length buckets
    assert [(s["rows"], s["length"]) for s in shapes] == [(1, 48), (3, 100), (12, 200)]
    for s in shapes:
        assert s["capture_ms"] > 0 and s["uncaptured_ms"] > 0 and s["replay_ms"] > 0
        assert s["memory_mib"] is None  # no GPU to read
    assert report["summary"]["shapes"] == 3
    assert report["summary"]["capture_ms_total"] == round(sum(s["capture_ms"] for s in shapes), 1)
