"""benchmarks.plot on a real measured result file: the figures it draws are the file's last
measured pass per concurrency level, and it writes a PNG."""

from __future__ import annotations

import json
import pathlib

from benchmarks import plot

RESULT = pathlib.Path(__file__).parent / "fixtures/http_laya_1q.json"


def test_summary_is_the_last_measured_pass_of_each_level():
    results = json.loads(RESULT.read_text())
    rows = plot.summarize(results)
    assert [r["c"] for r in rows] == [level["concurrency"] for level in results["levels"]]
    for row, level in zip(rows, results["levels"]):
        last = level["passes"][-1]
        assert (row["p50"], row["p95"], row["dps"]) == (last["p50_ms"], last["p95_ms"], last["decisions_per_s"])
        assert row["stages"]["infer"] == last["server_timing_p50_ms"]["infer"]
        assert set(row["stages"]) == set(plot.STAGES)


def test_plot_writes_a_png(tmp_path):
    out = tmp_path / "laya.png"
    bars = plot.plot([str(RESULT), str(RESULT)], str(out), "two copies")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(bars) == 2 * len(json.loads(RESULT.read_text())["levels"])


def test_labels_name_the_series(tmp_path, capsys):
    out = tmp_path / "named.png"
    plot.main([str(RESULT), str(RESULT), "--out", str(out), "--labels", "before,after"])
    printed = capsys.readouterr().out
    assert out.exists() and "before" in printed and "after" in printed
    assert plot.summarize(json.loads(RESULT.read_text()), "x")[0]["label"] == "x"


def test_a_gzipped_result_plots_as_the_plain_one(tmp_path):
    """The reports keep per-request results gzipped; the plot reads them as they are kept."""
    import gzip

    packed = tmp_path / "http_laya_1q.json.gz"
    packed.write_bytes(gzip.compress(RESULT.read_bytes()))
    plain = plot.plot([str(RESULT)], str(tmp_path / "plain.png"), "plain")
    assert plot.plot([str(packed)], str(tmp_path / "packed.png"), "packed") == plain
