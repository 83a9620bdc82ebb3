"""benchmarks.gpu.pass_probe's CPU dry run: the executor's steps on a GraphRunner, captured below
the graph-rows bound and uncaptured above it, each stage timed and adding up to the pass; and,
on tiny Cua-S1 and Clef-Flash exports, each model's own graph policy."""

from __future__ import annotations

import json

import pytest

from benchmarks.gpu import pass_probe
from benchmarks.make_workloads import HERE


@pytest.fixture(scope="module")
def cua_export(tmp_path_factory):
    """A tiny random Cua-S1 base with its random `text/` adapter merged (as tests/models/cua_s1)."""
    pytest.importorskip("peft")
    from models.cua_s1 import export, random_checkpoint

    random_cua = random_checkpoint.build(str(tmp_path_factory.mktemp("cua-random")), seed=3)
    out = str(tmp_path_factory.mktemp("cua-export"))
    export.export(random_cua.base, out, adapter=random_cua.adapter, progress=None)
    return out


@pytest.fixture(scope="module")
def clef_export(tmp_path_factory):
    """A tiny random Clef-Flash, one record a pass (`--records single`, as tests/models/clef_flash)."""
    from models.clef_flash import export, random_checkpoint

    clef_dir = random_checkpoint.build(str(tmp_path_factory.mktemp("clef") / "ck"), seed=3)
    out = str(tmp_path_factory.mktemp("clef-export"))
    export.export(clef_dir, out, records="single", progress=None)
    return out


def test_stages_add_up_to_the_pass(english, tmp_path, monkeypatch):
    monkeypatch.setenv("OMNI_CUDA_GRAPH_ROWS", "2")
    out = tmp_path / "probe.json"
    pass_probe.main(
        [
            "--export",
            english[1],
            "--device",
            "cpu",
            "--rows",
            "1,2,3",
            "--iters",
            "3",
            "--warmup",
            "1",
            "--out",
            str(out),
        ]
    )
    report = json.loads(out.read_text())
    assert report["graph_rows"] == 2
    cases = report["cases"]
    assert [cases[n]["captured"] for n in ("1", "2", "3")] == [True, True, False]
    assert cases["3"]["shape"][0] == 3 and cases["2"]["shape"][0] == 2  # uncaptured: its own rows
    assert cases["1"]["replay_max_abs_diff"] == cases["2"]["replay_max_abs_diff"] == 0.0
    assert "replay_max_abs_diff" not in cases["3"]
    for case in cases.values():
        p50 = case["p50_ms"]
        parts = sum(p50[k] for k in ("pack", "feeds_in", "run", "outputs_out", "unpack"))
        assert p50["pass"] > 0 and abs(parts - p50["pass"]) <= 0.5 * p50["pass"], p50


def test_a_workload_file_sets_the_rows_lengths(english, tmp_path, monkeypatch):
    monkeypatch.setenv("OMNI_CUDA_GRAPHS", "0")  # no graphs: the batch's own shape

    out = tmp_path / "probe.json"
    pass_probe.main(
        [
            "--export",
            english[1],
            "--device",
            "cpu",
            "--rows",
            "1,3",
            "--iters",
            "2",
            "--warmup",
            "1",
            "--workload",
            HERE + "/laya_48.jsonl",
            "--out",
            str(out),
        ]
    )
    cases = json.loads(out.read_text())["cases"]
    assert cases["3"]["shape"] == [3, 48] and not cases["3"]["captured"]  # 48 tokens, unpadded


def test_a_shape_whose_capture_failed_is_reported_not_captured(english, tmp_path, monkeypatch):
    """Where a capture fails (ONNX Runtime refusing it, as for GemmFloat8 graphs on the H200), the
    shape runs uncaptured, at the batch's own shape from then on (the batching policy stops
    padding a shape its runner will not replay), and the report says so."""
    from app.runtime import sessions

    def refuse(*args, **kwargs):
        raise RuntimeError("this graph cannot be captured")

    monkeypatch.setenv("OMNI_CUDA_GRAPH_ROWS", "2")
    monkeypatch.setattr(sessions, "Captured", refuse)
    out = tmp_path / "probe.json"
    pass_probe.main(
        ["--export", english[1], "--device", "cpu", "--rows", "1", "--iters", "2", "--warmup", "1", "--out", str(out)]
    )
    case = json.loads(out.read_text())["cases"]["1"]
    assert not case["bucketed"] and not case["captured"] and "replay_max_abs_diff" not in case
    p50 = case["p50_ms"]
    assert 0 < p50["run"] <= p50["pass"] and p50["unpack"] < p50["run"]  # the uncaptured run, timed as one


@pytest.mark.slow
def test_cua_s1_follows_the_models_graph_policy(cua_export, tmp_path):
    """pass_probe builds and batches as the executor does: the Qwen3.5 policy captures a batch
    only up to 1,024 of the tokens the graph runs (here the tokens after the baked head), so one
    218-token question replays a graph and eight do not."""
    out = tmp_path / "probe.json"
    pass_probe.main(
        [
            "--export",
            cua_export,
            "--device",
            "cpu",
            "--rows",
            "1,8",
            "--iters",
            "2",
            "--warmup",
            "1",
            "--workload",
            HERE + "/cua_218.jsonl",
            "--out",
            str(out),
        ]
    )
    cases = json.loads(out.read_text())["cases"]
    assert cases["1"]["captured"] and cases["1"]["replay_max_abs_diff"] == 0.0
    assert not cases["8"]["captured"] and cases["8"]["shape"][0] == 8
    assert cases["1"]["shape"][1] * 8 > 1024  # eight rows exceed the policy's token bound


@pytest.mark.slow
def test_clef_flash_replays_each_record_of_a_pass(clef_export, tmp_path):
    """pass_probe runs Clef-Flash as the executor does: its passes of records, each replaying its
    own shape's graph (GraphRunner on the CPU here: no capture, the same bookkeeping), every stage
    timed, the replay against a plain run."""
    out = tmp_path / "probe.json"
    pass_probe.main(
        [
            "--export",
            clef_export,
            "--device",
            "cpu",
            "--rows",
            "1,2",
            "--iters",
            "2",
            "--warmup",
            "1",
            "--workload",
            HERE + "/clef_1q.jsonl",
            "--out",
            str(out),
        ]
    )
    cases = json.loads(out.read_text())["cases"]
    for n in ("1", "2"):
        assert cases[n]["captured"] and cases[n]["p50_ms"]["run"] > 0
        assert cases[n]["p50_ms"]["pass"] >= cases[n]["p50_ms"]["run"]
        assert cases[n]["replay_max_abs_diff"] == 0.0
