"""Export: manifest, up-to-date no-op, Hub resolution and its offline error, refusals."""

from __future__ import annotations

import json
import pathlib
import os
import shutil
import subprocess
import sys

import pytest

from models import hub
from models.manifest import read
from models.placement import host_arithmetic
from tests.conftest import ROOT


def test_manifest_describes_the_export(english):
    meta = read(english[1])
    assert meta["family"] == "laya" and meta["name"] == "english" and "laya" in meta["aliases"]
    assert meta["random_weights"] is True
    assert meta["source"]["checkpoint"] == "local:" + os.path.basename(english[0])
    assert meta["config"] == {"max_len": 512, "head_max_len": 192, "head_layers": 2, "n_act": 2}
    assert meta["calibration"]["temperature_by_options"]["choice:11+"] == 0.5
    assert set(meta["files"]) >= {"model.onnx", "model.onnx.data", "tokenizer.json", "tokenizer_config.json"}
    assert all(len(h) == 64 for h in meta["files"].values())
    assert "model.safetensors" in meta["source"]["sha256"]
    assert meta["check"]["max_abs_logit_diff"] < 1e-3
    assert meta["dims"]["hidden_size"] == 64
    assert meta["weights_folded"] is True
    # No shape arithmetic meets data: ONNX Runtime would run it on the CPU and not capture the graph.
    assert host_arithmetic(os.path.join(english[1], meta["onnx"])) == []


def test_rerun_is_a_noop_and_force_redoes(english, tmp_path, capfd):
    out = str(tmp_path / "copy")
    shutil.copytree(english[1], out)
    before = os.path.getmtime(os.path.join(out, "model.onnx"))
    code = subprocess.run(
        [sys.executable, "-m", "models.export", "laya", "--checkpoint", english[0], "--out", out],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert code.returncode == 0, code.stderr
    assert "up to date" in code.stderr
    assert os.path.getmtime(os.path.join(out, "model.onnx")) == before


def test_an_up_to_date_export_from_before_folding_is_folded_not_exported_again(english, tmp_path):
    """An export whose manifest predates folded weights is up to date all the same: the run folds
    it in place and records it (this one has nothing left to fold: its graph is unchanged)."""
    from models.laya import export

    out = str(tmp_path / "copy")
    shutil.copytree(english[1], out)
    meta = read(out)
    del meta["weights_folded"]
    with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f)
    before = os.path.getmtime(os.path.join(out, "model.onnx"))
    said = []
    again = export.export(english[0], out, progress=said.append)
    assert again["weights_folded"] is True and read(out)["weights_folded"] is True
    assert said[-1] == "up to date: %s (its weight layouts folded now)" % out
    assert os.path.getmtime(os.path.join(out, "model.onnx")) == before  # nothing was left to fold
    assert {k: v for k, v in again.items() if k != "weights_folded"} == meta


@pytest.mark.slow
def test_changed_source_is_exported_again(english, tmp_path):
    from models.laya import export

    ck = str(tmp_path / "ck")
    shutil.copytree(english[0], ck)
    out = str(tmp_path / "out")
    first = export.export(ck, out, progress=None)
    cfg_path = os.path.join(ck, "rl_agent_config.json")
    cfg = json.loads(pathlib.Path(cfg_path).read_text())
    cfg["temperature"] = [1.0, 1.0, 1.0]
    pathlib.Path(cfg_path).write_text(json.dumps(cfg))
    second = export.export(ck, out, progress=None)
    assert second["calibration"]["temperature"] == [1.0, 1.0, 1.0] != first["calibration"]["temperature"]


def test_parallel_layout_is_refused(english, tmp_path):
    from models.laya import export

    ck = str(tmp_path / "ck")
    shutil.copytree(english[0], ck)
    cfg_path = os.path.join(ck, "rl_agent_config.json")
    cfg = json.loads(pathlib.Path(cfg_path).read_text())
    cfg["option_layout"] = "parallel"
    pathlib.Path(cfg_path).write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="parallel"):
        export.export(ck, str(tmp_path / "out"), progress=None)


def test_hub_download_offline_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "models.export",
            "laya",
            "--checkpoint",
            "convaiinnovations/laya/multilingual",
            "--revision",
            "55cf4c4ebb4ebe31b2550e8bdf3bd21b99753851",
            "--out",
            str(tmp_path / "o"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")},
    )
    assert proc.returncode == 2
    assert "unreachable" in proc.stderr and "convaiinnovations/laya" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_hub_resolves_a_cached_snapshot(english, tmp_path, monkeypatch):
    """A Hub id found in the local cache resolves to its snapshot and revision, offline."""
    sha = "55cf4c4ebb4ebe31b2550e8bdf3bd21b99753851"
    cache = tmp_path / "hub"
    repo_dir = cache / "models--convaiinnovations--laya"
    snapshot = repo_dir / "snapshots" / sha / "multilingual"
    shutil.copytree(english[0], snapshot)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(sha)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(c, "HF_HUB_CACHE", str(cache))
    got = hub.resolve("convaiinnovations/laya/multilingual", ["rl_agent_config.json", "tokenizer/*"])
    assert got.repo == "convaiinnovations/laya" and got.revision == sha
    assert os.path.exists(os.path.join(got.path, "rl_agent_config.json"))


def test_bad_checkpoint_names():
    with pytest.raises(hub.CheckpointUnavailable):
        hub.resolve("./does/not/exist", ["x"])
    with pytest.raises(hub.CheckpointUnavailable):
        hub.resolve("not a repo id", ["x"])


@pytest.mark.slow
def test_typed_decisions_variant_exports(tmp_path):
    """The third published variant: english-shaped encoder, 1024-token window, its own aliases."""
    from models.laya import export, random_checkpoint
    from models.registry import load

    ck = random_checkpoint.build(str(tmp_path / "laya-typed-decisions"), "typed-decisions", "tiny", seed=3)
    meta = export.export(ck, str(tmp_path / "out"), progress=None)
    assert meta["variant"] == meta["name"] == "typed-decisions"
    assert "decisions" in meta["aliases"]
    assert meta["config"]["max_len"] == 1024 and meta["config"]["head_max_len"] == 256
    model = load(str(tmp_path / "out"))
    prepared = model.prepare({"state": "word " * 2000, "questions": {"q": {"type": "noul", "instructions": "ok?"}}})
    assert prepared.longest == 1024 and prepared.context[1]["truncated"]
