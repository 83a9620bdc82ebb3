"""benchmarks.host_cold on the tiny english Laya export: every step of the export's own code is
timed both ways over a real workload, and the report says so."""
from __future__ import annotations

import json
import os

import pytest

from benchmarks import host_cold

WORKLOAD = os.path.join(os.path.dirname(host_cold.__file__), "workloads", "laya_48.jsonl")


@pytest.mark.parametrize("wait", ["sleep", "yield"])
def test_each_step_back_to_back_and_after_a_wait(english, tmp_path, wait):
    out = tmp_path / "host_cold.json"
    host_cold.main(["--export", english[1], "--workload", WORKLOAD, "--iters", "3", "--sleep-ms", "1",
                    "--wait", wait, "--out", str(out)])
    report = json.loads(out.read_text())
    assert report["model"] == "english" and report["requests"] > 1
    assert report["sleep_ms"] == 1.0 and report["wait"] == wait
    for way in ("back_to_back_us", "after_sleep_us"):
        assert set(report[way]) == set(host_cold.STEPS)
        assert all(v > 0 for v in report[way].values())
    for step, ratio in report["ratio"].items():       # from the unrounded medians
        rounded = report["after_sleep_us"][step] / report["back_to_back_us"][step]
        assert abs(ratio - rounded) <= 0.02 * ratio + 0.01
