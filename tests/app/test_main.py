"""The app factory at load: an export that failed its parity gate is named; one it cannot serve
stops the server with one line."""

from __future__ import annotations

import logging

import pytest

from app.config import Settings
from app.main import TOKENIZER_THREADS, create_app
from models import precision
from models.tokenizer import usable_cores


@pytest.mark.slow
def test_a_half_export_that_failed_its_gate_is_named_at_load(english, tmp_path, monkeypatch, caplog):
    from models.laya import export

    monkeypatch.setattr(precision, "MAX_DRIFT", 1e-6)  # below any real drift: the gate fails
    out = str(tmp_path / "fp16-recorded")
    export.export(english[0], out, dtype="float16", parity_gate="record", progress=None)
    with caplog.at_level(logging.WARNING, logger="omni"):
        create_app(Settings(models=(out,)))
    warned = [r.getMessage() for r in caplog.records if "parity gate" in r.getMessage()]
    assert len(warned) == 1 and "float16 export that FAILED its parity gate" in warned[0]
    assert "--parity-gate record" in warned[0]


@pytest.mark.slow
def test_a_half_export_gated_on_the_cpu_after_cuda_failed_is_named_at_load(english, tmp_path, monkeypatch, caplog):
    """onnxruntime listed CUDA at export but the provider did not take the graph (the CPU build's
    real fallback stands in for a GPU build without a driver): the gate ran on the CPU, the
    manifest says why, /v1/models shows it and the server's load names it."""
    from models.laya import export

    monkeypatch.setattr(precision, "cuda_listed", lambda: True)
    out = str(tmp_path / "fp16-cpu-gated")
    meta = export.export(english[0], out, dtype="float16", progress=None)
    gate = meta["check"]["parity_gate"]
    assert gate["passes"] and gate["device"] == "cpu" and "did not initialise" in gate["cuda_failed"]
    with caplog.at_level(logging.WARNING, logger="omni"):
        app = create_app(Settings(models=(out,)))
    warned = [r.getMessage() for r in caplog.records if "parity gate" in r.getMessage() or "gated" in r.getMessage()]
    assert len(warned) == 1 and "gated against float32 on the CPU, not on CUDA" in warned[0]
    (slot,) = app.state.omni.registry.slots
    assert slot.model.describe()["parity_gate"]["cuda_failed"] == gate["cuda_failed"]  # GET /v1/models


def test_an_export_that_passed_is_not_named(english, caplog):
    with caplog.at_level(logging.WARNING, logger="omni"):
        create_app(Settings(models=(english[1],)))
    assert not [r for r in caplog.records if "parity gate" in r.getMessage()]


def test_an_export_older_than_folded_weights_is_named_with_the_fix(english, tmp_path, caplog):
    """An export whose manifest does not say its weights were folded (written before exports
    folded them) gets a warning naming the one-off command; `python -m models.fold` then folds
    it (nothing left here: the exporter folded it) and records it, and the warning goes."""
    import json
    import shutil

    from models import fold

    out = str(tmp_path / "old")
    shutil.copytree(english[1], out)
    with open(out + "/manifest.json", encoding="utf-8") as f:
        meta = json.load(f)
    assert meta.pop("weights_folded") is True
    with open(out + "/manifest.json", "w", encoding="utf-8") as f:
        json.dump(meta, f)
    with caplog.at_level(logging.WARNING, logger="omni"):
        create_app(Settings(models=(out,)))
    warned = [r.getMessage() for r in caplog.records if "models.fold" in r.getMessage()]
    assert len(warned) == 1 and "python -m models.fold %s" % out in warned[0]
    caplog.clear()
    assert fold.main([out]) == 0
    with caplog.at_level(logging.WARNING, logger="omni"):
        create_app(Settings(models=(out,)))
    assert not [r for r in caplog.records if "models.fold" in r.getMessage()]


def test_the_app_sizes_the_tokenizer_pool_before_its_models_load(english, monkeypatch):
    import os

    import models.registry as registry

    monkeypatch.delenv("RAYON_NUM_THREADS", raising=False)
    seen = []
    load = registry.load
    monkeypatch.setattr(registry, "load", lambda d: seen.append(os.environ.get("RAYON_NUM_THREADS")) or load(d))
    create_app(Settings(models=(english[1],)))
    assert seen == [str(min(TOKENIZER_THREADS, usable_cores()))]


def test_an_export_the_server_cannot_serve_stops_it_with_one_line(tmp_path, caplog):
    """No traceback from Granian's worker: the log names the export and why, and the process
    exits (a missing export here; a stale baked prompt head the same way, tests/models/cua_s1)."""
    missing = str(tmp_path / "not-an-export")
    with caplog.at_level(logging.ERROR, logger="omni"), pytest.raises(SystemExit) as stop:
        create_app(Settings(models=(missing,)))
    assert stop.value.code == 1
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert line.startswith("cannot serve the export in %s: " % missing) and "manifest.json" in line
