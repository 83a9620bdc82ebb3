"""A float16 Cua-S1 export runs the parity gate against float32 on the model's own letter
distributions and records it in the manifest (the gate itself: tests/models/qwen35/test_gate.py)."""
from __future__ import annotations

import numpy as np

from models import precision
from models.manifest import read


def test_a_float16_export_records_its_parity_gate(random_cua, tmp_path):
    from models.cua_s1 import export
    from models.registry import load

    out = str(tmp_path / "cua-fp16")
    messages = []
    export.export(random_cua.base, out, adapter=random_cua.text, dtype="float16", gate_device="cpu",
                  progress=messages.append)
    meta = read(out)
    gate = meta["check"]["parity_gate"]
    assert gate["passes"] and gate["mode"] == "enforce" and gate["device"] == "cpu"
    assert 0 < gate["max_prob_drift"] <= precision.MAX_DRIFT and gate["rows"] == 8
    assert "parity_gate" not in meta["graph"]
    assert any(m.startswith("parity gate vs float32 on cpu") and m.endswith("passes") for m in messages)
    model = load(out)                                  # the export serves as before
    assert model.manifest["weights_dtype"] == "float16"
    assert np.load(f"{out}/letter_rows.npy").shape == (26, meta["dims"]["hidden_size"])


def test_a_float32_export_has_no_gate(random_cua, tmp_path):
    from models.cua_s1 import export

    out = str(tmp_path / "cua-fp32")
    export.export(random_cua.base, out, adapter=random_cua.text, progress=None)
    assert read(out)["check"] == {}


def test_a_bfloat16_export_without_cuda_records_that_its_gate_did_not_run(random_cua, tmp_path, caplog):
    import logging

    from app.config import Settings
    from app.main import create_app
    from models.cua_s1 import export

    out = str(tmp_path / "cua-bf16")
    export.export(random_cua.base, out, adapter=random_cua.text, dtype="bfloat16", gate_device="cpu",
                  parity_gate="record", progress=None)
    gate = read(out)["check"]["parity_gate"]
    assert not gate["passes"] and "no bfloat16 kernels" in gate["not_run"]
    with caplog.at_level(logging.WARNING, logger="omni"):
        create_app(Settings(models=(out,)))
    assert any("parity gate against float32 did NOT RUN" in r.getMessage() for r in caplog.records)
