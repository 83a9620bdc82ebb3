"""The app factory's warnings at load: an export that failed its parity gate says so."""
from __future__ import annotations

import logging

from app.config import Settings
from app.main import create_app
from models import precision


def test_a_half_export_that_failed_its_gate_is_named_at_load(english, tmp_path, monkeypatch, caplog):
    from models.laya import export

    monkeypatch.setattr(precision, "MAX_DRIFT", 1e-6)        # below any real drift: the gate fails
    out = str(tmp_path / "fp16-recorded")
    export.export(english[0], out, dtype="float16", gate_device="cpu", parity_gate="record", progress=None)
    with caplog.at_level(logging.WARNING, logger="omni"):
        create_app(Settings(models=(out,)))
    warned = [r.getMessage() for r in caplog.records if "parity gate" in r.getMessage()]
    assert len(warned) == 1 and "float16 export that FAILED its parity gate" in warned[0]
    assert "--parity-gate record" in warned[0]


def test_an_export_that_passed_is_not_named(english, caplog):
    with caplog.at_level(logging.WARNING, logger="omni"):
        create_app(Settings(models=(english[1],)))
    assert not [r for r in caplog.records if "parity gate" in r.getMessage()]
