"""benchmarks.gpu.conv_probe's CPU dry run: the channels-last conv (as exported) computes numpy's
causal conv and silu, the channels-first one between transposes gives the same outputs at every
shape, and both are timed."""
from __future__ import annotations

import json

from benchmarks.gpu import conv_probe


def test_both_forms_agree_and_are_timed(tmp_path):
    out = tmp_path / "conv.json"
    conv_probe.main(["--device", "cpu", "--shapes", "1x5,3x17", "--channels", "24", "--copies", "2",
                     "--iters", "2", "--out", str(out)])
    rows = json.loads(out.read_text())
    assert [(r["rows"], r["tokens"], r["channels"]) for r in rows] == [(1, 5, 24), (3, 17, 24)]
    for r in rows:
        assert r["max_abs_diff"] <= 1e-3                          # fp16 outputs, the same maths
        assert r["max_abs_diff_reference"] <= 1e-2                # fp16 against float64
        assert r["channels_last"]["us_per_conv"] > 0 and r["channels_first"]["us_per_conv"] > 0
