"""benchmarks.first_requests against real servers it starts (CPU here: no captures): a server a
concurrency, its start-to-ready, its first requests and its steady state, side by side."""
from __future__ import annotations

import json

import pytest

from benchmarks import first_requests


@pytest.mark.slow
def test_first_requests_and_steady_state_of_a_fresh_server(english, tmp_path, monkeypatch, capsys):
    workload = tmp_path / "w.jsonl"
    workload.write_text("".join(json.dumps({"model": "english", "state": state, "questions": {
        "refund": {"type": "noul", "instructions": "Refund?"}}}) + "\n"
        for state in ("I was charged twice.", "My parcel never came, and the tracking page says it was delivered.")))
    monkeypatch.setenv("OMNI_MODELS", english[1])
    out = tmp_path / "first.json"
    assert first_requests.main(["--workload", str(workload), "--requests", "6", "--concurrency", "1,2",
                                "--quiet", "0.2", "--settle", "5", "--procs", "1", "--label", "cpu",
                                "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [level["concurrency"] for level in report["levels"]] == [1, 2]
    for level in report["levels"]:
        assert level["ready_s"] > 0 and level["captures_at_ready"] == 0 == level["captures_before_steady"]
        for name in ("first", "steady"):
            assert level[name]["ok"] == level[name]["requests"] == 6 and level[name]["mean_ms"] > 0
        assert len(level["first_ms"]) == 6
        assert level["first_over_steady"]["mean_ms"] == level["first"]["mean_ms"] / level["steady"]["mean_ms"]
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines] == [["cpu", "c=1"], ["cpu", "c=2"]]
