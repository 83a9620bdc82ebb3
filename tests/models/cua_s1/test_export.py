"""A float16 Cua-S1 export runs the parity gate against float32 on the model's own letter
distributions and records it in the manifest (the gate itself: tests/models/qwen35/test_gate.py)."""

from __future__ import annotations

import numpy as np
import pytest

from models import precision
from models.manifest import read
from models.placement import host_arithmetic

pytestmark = pytest.mark.slow  # several exports each, gates included


def test_a_float16_export_records_its_parity_gate(random_cua, tmp_path):
    from models.cua_s1 import export
    from models.registry import load

    out = str(tmp_path / "cua-fp16")
    messages = []
    export.export(random_cua.base, out, adapter=random_cua.text, dtype="float16", progress=messages.append)
    meta = read(out)
    gate = meta["check"]["parity_gate"]
    assert gate["passes"] and gate["mode"] == "enforce" and gate["device"] == "cpu"
    assert 0 < gate["max_prob_drift"] <= precision.MAX_DRIFT and gate["rows"] == 8
    assert "parity_gate" not in meta["graph"]
    assert any(m.startswith("parity gate vs float32 on cpu") and m.endswith("passes") for m in messages)
    model = load(out)  # the export serves as before
    assert model.manifest["weights_dtype"] == "float16"
    assert np.load(f"{out}/letter_rows.npy").shape == (26, meta["dims"]["hidden_size"])
    # No shape arithmetic meets data: ONNX Runtime would run it on the CPU and not capture the graph.
    assert host_arithmetic(f"{out}/{meta['onnx']}") == []


def test_a_float32_export_has_no_gate_and_an_older_graph_revision_is_written_again(random_cua, tmp_path, caplog):
    """A float32 export runs no gate. Exports record the revision of the graph the exporter
    writes: one of an earlier revision (a manifest without it, as before revisions were recorded)
    is named by the server at load and is not up to date, so its export command writes the
    current graph again."""
    import json
    import logging
    import os

    from app.config import Settings
    from app.main import create_app
    from models.cua_s1 import export
    from models.qwen35.revision import GRAPH_REVISION
    from models.registry import load

    out = str(tmp_path / "cua-fp32")
    export.export(random_cua.base, out, adapter=random_cua.text, progress=None)
    meta = read(out)
    assert meta["check"] == {}
    assert meta["export_options"]["graph_revision"] == GRAPH_REVISION
    assert load(out).notes() == []
    messages = []
    export.export(random_cua.base, out, adapter=random_cua.text, progress=messages.append)
    assert not any(m.startswith("[3/5]") for m in messages)  # up to date: nothing exported
    del meta["export_options"]["graph_revision"]
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(meta, f)
    (note,) = load(out).notes()
    assert note.startswith("its graph is revision 1 of the Qwen3.5 exporter's, which writes %d" % GRAPH_REVISION)
    assert "running its export command again writes it" in note
    with caplog.at_level(logging.WARNING, logger="omni"):
        create_app(Settings(models=(out,)))
    assert [r.getMessage() for r in caplog.records if "graph is revision" in r.getMessage()] == [
        "model cua-s1-4b-0.2: " + note
    ]
    messages = []
    export.export(random_cua.base, out, adapter=random_cua.text, progress=messages.append)
    assert read(out)["export_options"]["graph_revision"] == GRAPH_REVISION
    assert load(out).notes() == []
    assert messages and not any("up to date" in m for m in messages)


def test_a_bfloat16_export_without_cuda_records_that_its_gate_did_not_run(random_cua, tmp_path, caplog):
    import logging

    from app.config import Settings
    from app.main import create_app
    from models.cua_s1 import export

    out = str(tmp_path / "cua-bf16")
    export.export(random_cua.base, out, adapter=random_cua.text, dtype="bfloat16", parity_gate="record", progress=None)
    gate = read(out)["check"]["parity_gate"]
    assert not gate["passes"] and "no bfloat16 kernels" in gate["not_run"]
    with caplog.at_level(logging.WARNING, logger="omni"):
        create_app(Settings(models=(out,)))
    assert any("parity gate against float32 did NOT RUN" in r.getMessage() for r in caplog.records)


def test_a_bfloat16_export_feeds_its_gated_delta_net_kernels_float16(random_cua, tmp_path):
    """The CUDA GatedDeltaNet kernel of a bfloat16 export reads float16 (gdn.input_dtype), so the
    server builds it with its configured chunked engine; the manifest records what it reads."""
    from models import gdn_plan
    from models.cua_s1 import export

    out = str(tmp_path / "cua-bf16-gdn")
    common = dict(adapter=random_cua.text, dtype="bfloat16", gdn_kernel="gated_delta_net_fused", parity_gate="record")
    export.export(random_cua.base, out, progress=None, **common)
    meta = read(out)
    assert meta["weights_dtype"] == "bfloat16" and meta["graph"]["gdn_dtype"] == "float16"
    assert meta["export_options"]["gdn_dtype"] == "float16"
    assert gdn_plan.plan_for("chunked_split", gdn_plan.gdn_dtype(meta)) == "chunked_split"
    messages = []
    export.export(random_cua.base, out, progress=messages.append, **common)
    assert read(out)["exported_at"] == meta["exported_at"] and not any("exporting" in m for m in messages)


def test_the_export_command_refuses_options_it_no_longer_takes(random_cua, tmp_path, capsys):
    import pytest

    from models import export as command

    base = ["cua-s1", "--checkpoint", random_cua.base, "--out", str(tmp_path / "x")]
    for extra, says in (
        (["--gdn-kernel", "gated_delta_net"], "invalid choice: 'gated_delta_net'"),
        (["--gdn-dtype", "model"], "unrecognized arguments: --gdn-dtype"),
        (["--prompt-head", "in-rows"], "unrecognized arguments: --prompt-head"),
    ):
        with pytest.raises(SystemExit) as exit_:
            command.main(base + extra)
        assert exit_.value.code == 2 and says in capsys.readouterr().err
    with pytest.raises(SystemExit):
        command.main(
            ["laya", "--checkpoint", random_cua.base, "--out", str(tmp_path / "y"), "--gdn-kernel", "linear_attention"]
        )
    assert "--gdn-kernel does not apply to laya" in capsys.readouterr().err
    # A family's own options go to it alone: Open-Jev's --base or Cua-S1's --adapter elsewhere is
    # refused, not dropped.
    for model, option in (("cua-s1", "--base"), ("open-jev", "--adapter"), ("clef-flash", "--max-length")):
        with pytest.raises(SystemExit) as exit_:
            command.main([model, "--checkpoint", random_cua.base, "--out", str(tmp_path / "z"), option, "1"])
        assert exit_.value.code == 2 and "%s does not apply to %s" % (option, model) in capsys.readouterr().err
    assert not (tmp_path / "z").exists()
    assert not (tmp_path / "x").exists()
    with pytest.raises(SystemExit) as exit_:
        command.main(["laya", "--checkpoint", random_cua.base, "--out", str(tmp_path / "w"), "--gdn-plan", "auto"])
    assert exit_.value.code == 2 and "--gdn-plan does not apply to laya" in capsys.readouterr().err


def test_the_gdn_plan_reaches_the_gate_from_the_command_alone(random_cua, tmp_path, monkeypatch):
    """The parity gate builds its session under the GatedDeltaNet engine that `--gdn-plan` names
    (the server's OMNI_CUDA_GDN_PLAN, handed on by deploy/export.sh), where the graph's dtype
    allows it; the exporter reads no setting of its own from the environment."""
    import os

    from models import export as command
    from models import precision
    from models.cua_s1 import export as family
    from models.qwen35 import gate

    seen = []

    def gate_session(path, device="auto"):
        seen.append(os.environ.get("ORT_GDN_PLAN"))
        raise RuntimeError("stop after the session is asked for")

    monkeypatch.setattr(precision, "gate_session", gate_session)
    monkeypatch.setenv("OMNI_CUDA_GDN_PLAN", "chunked")  # not read by the exporter
    for plan, dtype, want in (
        ("recurrent", "float16", "recurrent"),
        ("chunked_split", "float16", "chunked_split"),
        ("chunked_split", "float32", None),
        ("auto", "float16", None),
    ):
        with pytest.raises(RuntimeError, match="stop after"):
            gate.session_for("unused.onnx", "gated_delta_net_fused", dtype, plan)
        assert seen.pop() == want, (plan, dtype)
    passed = {}
    real = family.export

    def export(*args, **kwargs):
        passed.update(kwargs)

    export.__wrapped__ = real  # the signature the command checks options against
    monkeypatch.setattr(family, "export", export)
    assert (
        command.main(
            ["cua-s1", "--checkpoint", random_cua.base, "--out", str(tmp_path / "v"), "--gdn-plan", "recurrent"]
        )
        == 0
    )
    assert passed["gdn_plan"] == "recurrent"
    passed.clear()
    assert command.main(["cua-s1", "--checkpoint", random_cua.base, "--out", str(tmp_path / "v")]) == 0
    assert "gdn_plan" not in passed  # the exporter's default: the server's (gdn_plan.DEFAULT)


def test_the_prompt_head_is_baked_an_export_without_one_still_serves_and_a_stale_head_is_refused(random_cua, tmp_path):
    """The export bakes the system turn in and records its ids; an export without a baked head
    (made before the exporter baked it) still serves every row whole, is named at load and is
    not up to date. A baked head that this server's prompt would not produce is refused at load,
    before any request."""
    import json
    import os
    import shutil

    import pytest

    from models.cua_s1 import export
    from models.cua_s1.prepare import head_ids
    from models.registry import load

    baked = str(tmp_path / "cua-baked")
    export.export(random_cua.base, baked, adapter=random_cua.text, progress=None)
    model = load(baked)
    head = head_ids(model.tok)
    assert read(baked)["prefix"] == {"ids": head, "tokens": len(head)} and model.adapter.head == head
    assert model.describe()["baked_prompt_tokens"] == len(head)  # GET /v1/models
    prepared = model.prepare(model.warmup_request)
    assert prepared.longest == len(prepared.work[0]) - len(head)  # what the graph runs
    assert prepared.tokens == len(prepared.work[0])  # usage: the whole prompt
    stale = str(tmp_path / "cua-stale")
    shutil.copytree(baked, stale)
    meta = read(stale)
    meta["prefix"]["ids"] = meta["prefix"]["ids"][1:]
    with open(os.path.join(stale, "manifest.json"), "w") as f:
        json.dump(meta, f)
    with pytest.raises(ValueError, match="differs from the %d tokens.*export command again" % len(head)):
        load(stale)

    headless = str(tmp_path / "cua-rows")  # as the exporter wrote before it baked the head
    shutil.copytree(baked, headless)
    meta = read(headless)
    meta["prefix"] = None
    del meta["export_options"]["prompt_head"]
    with open(os.path.join(headless, "manifest.json"), "w") as f:
        json.dump(meta, f)
    model = load(headless)
    assert model.adapter.head == [] and "baked_prompt_tokens" not in model.describe()
    assert model.prepare(model.warmup_request).longest == len(model.prepare(model.warmup_request).work[0])
    (note,) = model.notes()
    assert note.startswith("its graph runs the system turn in every row")
    messages = []
    export.export(random_cua.base, headless, adapter=random_cua.text, progress=messages.append)
    assert messages and not any("up to date" in m for m in messages)
    assert read(headless)["prefix"] == {"ids": head, "tokens": len(head)}
