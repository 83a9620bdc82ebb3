"""A float16 Laya export: gated against float32 at export time, and answering the test cases as
the float32 export does within the gate (top choice where the margin is >= 0.05, probabilities
within 0.02), through the same served pipeline on ONNX Runtime's CPU kernels."""

from __future__ import annotations

import subprocess
import sys

import pytest

from models import precision
from models.manifest import read
from tests.conftest import ROOT, Pipeline
from tests.models.laya.cases import CASES


@pytest.fixture(scope="module")
def english_fp16(english, tmp_path_factory):
    from models.laya import export

    out = str(tmp_path_factory.mktemp("laya-fp16") / "english-fp16")
    export.export(english[0], out, dtype="float16", progress=None)
    return out


def test_manifest_records_the_dtype_and_the_gate(english_fp16):
    meta = read(english_fp16)
    assert meta["weights_dtype"] == "float16" and meta["export_options"]["dtype"] == "float16"
    gate = meta["check"]["parity_gate"]
    assert gate["passes"] and gate["rows"] == 1 + 3 + 8
    assert 0 < gate["max_prob_drift"] <= precision.MAX_DRIFT


def test_fp16_answers_match_fp32_within_the_gate(english, english_fp16):
    fp32, fp16 = Pipeline(english[1]), Pipeline(english_fp16)
    probs, refs = [], []
    for _, state, questions in CASES:
        body = {"state": state, "questions": questions}
        a, b = fp16(body), fp32(body)
        assert a["usage"] == b["usage"]
        for qid, ref in b["answers"].items():
            if "probabilities" in ref:
                probs.append(list(a["answers"][qid]["probabilities"].values()))
                refs.append(list(ref["probabilities"].values()))
    gate = precision.gate_rows(probs, refs)
    assert gate["passes"], gate
    assert gate["max_prob_drift"] > 0  # it is a different graph, not the same one


def test_gate_refuses_a_distribution_that_moves():
    ok = precision.gate_rows([[0.7, 0.3]], [[0.71, 0.29]])
    assert ok["passes"] and ok["top_choice_identical"] == "1/1"
    flipped = precision.gate_rows([[0.45, 0.55]], [[0.6, 0.4]])
    assert not flipped["passes"] and flipped["top_choice_identical"] == "0/1"
    close_call = precision.gate_rows([[0.495, 0.505]], [[0.51, 0.49]])  # margin < 0.05: top not gated
    assert close_call["passes"] and close_call["top_choice_identical"] == "0/0"


def test_cli_refuses_bfloat16_for_laya(english, tmp_path):
    def export(*args):
        return subprocess.run(
            [sys.executable, "-m", "models.export", *args, "--checkpoint", english[0], "--out", str(tmp_path / "x")],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )

    run = export("laya", "--dtype", "bfloat16")
    assert run.returncode == 2 and "float32 or float16" in run.stderr
    run = export("laya", "--parity-gate", "warn")
    assert run.returncode == 2 and "invalid choice: 'warn'" in run.stderr


def test_the_manifest_names_where_the_gate_ran(english_fp16):
    import onnxruntime

    # auto: CUDA where ONNX Runtime has it, else (CI) the CPU provider.
    device = read(english_fp16)["check"]["parity_gate"]["device"]
    assert device in ("cuda", "cpu")
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        assert device == "cpu"


@pytest.mark.slow
def test_record_exports_what_enforce_refuses(english, tmp_path, monkeypatch, capsys):
    """Against a drift limit below the export's own drift: enforce leaves nothing behind (and the
    export command exits 3, deploy/export.sh's cue for float32), record writes the export with
    the failure in its manifest."""
    import os

    from models import export as command
    from models.laya import export

    monkeypatch.setattr(precision, "MAX_DRIFT", 1e-6)
    refused = str(tmp_path / "refused")
    assert (
        command.main(["laya", "--checkpoint", english[0], "--out", refused, "--dtype", "float16"])
        == command.GATE_FAILED
        == 3
    )
    err = capsys.readouterr().err
    assert "error: half-precision graph fails the parity gate" in err and "--parity-gate record" in err
    assert not os.path.exists(os.path.join(refused, "manifest.json"))
    kept = str(tmp_path / "kept")
    export.export(english[0], kept, dtype="float16", parity_gate="record", progress=None)
    gate = read(kept)["check"]["parity_gate"]
    assert not gate["passes"] and gate["mode"] == "record" and gate["max_prob_drift"] > 1e-6
    # Unchanged sources: a record run finds it up to date, an enforce run exports again and refuses.
    made = read(kept)["exported_at"]
    export.export(english[0], kept, dtype="float16", parity_gate="record", progress=None)
    assert read(kept)["exported_at"] == made
    with pytest.raises(precision.GateFailed):
        export.export(english[0], kept, dtype="float16", progress=None)


def test_the_export_command_exits_2_without_a_checkpoint(tmp_path):
    """Not 3, which deploy/export.sh reads as a refused gate and answers with a float32 export
    (test_record_exports_what_enforce_refuses)."""
    from models import export as command

    assert command.main(["laya", "--checkpoint", str(tmp_path / "none"), "--out", str(tmp_path / "y")]) == 2


def test_models_list_names_the_dtype_and_the_gate(english, english_fp16):
    from models.registry import load

    half, full = load(english_fp16).describe(), load(english[1]).describe()
    assert half["weights_dtype"] == "float16" and half["parity_gate"]["passes"] is True
    assert half["parity_gate"]["top_choice_identical"] and half["parity_gate"]["device"] in ("cpu", "cuda")
    assert full["weights_dtype"] == "float32" and "parity_gate" not in full
