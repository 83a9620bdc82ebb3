"""benchmarks.inprocess on the CPU: two exports of one checkpoint side by side, the report's
parity against the first export and a timing for every export and workload."""

from __future__ import annotations

import json

from benchmarks import inprocess


def test_two_exports_side_by_side(english, tmp_path):
    out = tmp_path / "inprocess.json"
    inprocess.main(
        [
            "--checkpoint",
            english[0],
            "--export",
            "a=" + english[1],
            "--export",
            "b=" + english[1],
            "--device",
            "cpu",
            "--warmup",
            "0",
            "--iters",
            "2",
            "--no-laya",
            "--out",
            str(out),
        ]
    )
    report = json.loads(out.read_text())
    workloads = ("1q", "3q", "16x1q", "64x1q")
    assert set(report["results"]) == {"%s/%s" % (e, w) for e in ("a", "b") for w in workloads}
    assert all(r["p50_ms"] > 0 for r in report["results"].values())
    # The same export on both sides: identical answers, the gate's measures say so.
    assert report["parity_vs_first"]["b"]["max_prob_drift"] == 0.0 and report["parity_vs_first"]["b"]["passes"]
    assert report["tokens"]["64x1q"] > report["tokens"]["16x1q"] > report["tokens"]["1q"] > 0
