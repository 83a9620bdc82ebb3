"""A float16 Open-Jev export runs the parity gate against float32 on the model's own calibrated
yes/no (the gate itself: tests/models/qwen35/test_gate.py) and records it in the manifest."""

from __future__ import annotations

import os

import pytest

from models import precision
from models.manifest import read
from models.placement import host_arithmetic

pytestmark = pytest.mark.slow  # a float16 export and its gate


def test_a_float16_export_records_its_parity_gate(package, tmp_path):
    from models.open_jev import export

    out = str(tmp_path / "jev-fp16")
    export.export(package, out, base=os.path.join(os.path.dirname(package), "base"), dtype="float16", progress=None)
    meta = read(out)
    gate = meta["check"]["parity_gate"]
    assert gate["passes"] and gate["device"] == "cpu" and gate["rows"] == 8
    assert 0 < gate["max_prob_drift"] <= precision.MAX_DRIFT
    assert 0 < gate["final_hidden_rel_err"] < 0.05
    assert os.path.exists(os.path.join(out, "open_jev_export.json"))  # the export completed
    # No shape arithmetic meets data: ONNX Runtime would run it on the CPU and not capture the graph.
    assert host_arithmetic(os.path.join(out, meta["onnx"])) == []
