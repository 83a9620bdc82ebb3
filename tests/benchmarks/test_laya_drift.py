"""benchmarks.laya_drift on the CPU: an fp32 export against its own checkpoint's torch model."""

from __future__ import annotations

import json

from benchmarks import laya_drift


def test_an_fp32_export_is_near_its_checkpoint(english, tmp_path):
    out = tmp_path / "drift.json"
    laya_drift.main(
        [
            "--checkpoint",
            english[0],
            "--export",
            "a=" + english[1],
            "--export",
            "b=" + english[1],
            "--batches",
            "3",
            "--out",
            str(out),
        ]
    )
    report = json.loads(out.read_text())
    assert report["rows"] == {"a": 36, "b": 36}
    a, b = report["drift"]["a"], report["drift"]["b"]
    assert a == b  # the same export: the same numbers
    assert 0.0 <= a["median"] <= a["p99"] <= a["max"] < 1e-3  # fp32 graph against fp32 torch
