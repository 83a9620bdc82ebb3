"""Clef-Flash end to end: the tiny checkpoint exported as ONE clef-joint-v1 graph (our backbone +
the masked-matmul head), run by ONNX Runtime through the served model, against transformers'
backbone + Cloudflare's reference head (`systemone`); records of several requests never mix; HTTP."""
from __future__ import annotations

import types

import httpx
import numpy as np
import pytest
import torch

from tests.conftest import Pipeline, run_server

from .cases import CASES, body


@pytest.fixture(scope="module")
def clef_export(clef_dir, tmp_path_factory):
    from models.clef_flash import export

    out = str(tmp_path_factory.mktemp("clef-export"))
    export.export(clef_dir, out, progress=None)
    return out


@pytest.fixture(scope="module")
def reference_model(clef_dir, ref, ref_head):
    from transformers import Qwen3_5ForConditionalGeneration

    backbone = Qwen3_5ForConditionalGeneration.from_pretrained(clef_dir, dtype=torch.float32).eval()
    return ref.ClefModel(backbone, ref_head).eval()


def test_export_is_one_checked_graph(clef_export):
    from models import manifest

    meta = manifest.read(clef_export)
    assert meta["family"] == "clef_flash" and meta["signature"] == "clef-joint-v1"
    assert meta["graph"]["check_max_abs_logit_diff"] < 1e-3
    # The system turn and STATE: line are baked in (what the reference tests below then check).
    assert meta["export_options"]["prompt_head"] == "baked" and meta["prefix"]["tokens"] > 20


def test_the_baked_head_is_cut_off_each_record_and_a_stale_head_refused(clef_export, clef_dir, tmp_path, tok):
    """The graph runs the ids after the head, with the whole record's positions and spans; an
    `in-rows` export runs them all and gives the same logits; a baked head this server's prompt
    would not produce is refused at load."""
    import json
    import os
    import shutil

    from models.clef_flash import export
    from models.registry import load

    request = body(CASES[0][1], CASES[0][2], model="clef-flash")
    baked = Pipeline(clef_export)
    head = baked.model.adapter.head
    (prep,), (logits,), packed = baked.outputs([request])
    feeds = packed.parts[0]
    assert feeds["input_ids"].shape[1] == prep.longest == -(-(prep.tokens - len(head)) // 64) * 64
    assert list(feeds["token_positions"]) == list(range(prep.tokens)) and packed.real_tokens == prep.tokens - len(head)
    rows = str(tmp_path / "clef-rows")
    export.export(clef_dir, rows, prompt_head="in-rows", progress=None)
    whole = Pipeline(rows)
    assert whole.model.adapter.head == [] and whole.model.notes() == []
    (_,), (want,), _ = whole.outputs([request])
    assert np.abs(logits - want).max() <= 1e-4 * max(1.0, float(np.abs(want).max()))
    stale = str(tmp_path / "clef-stale")
    shutil.copytree(clef_export, stale)
    meta = json.load(open(os.path.join(stale, "manifest.json")))
    meta["prefix"]["ids"] = meta["prefix"]["ids"][:-1]
    json.dump(meta, open(os.path.join(stale, "manifest.json"), "w"))
    with pytest.raises(ValueError, match="export command again"):
        load(stale)


@pytest.mark.parametrize("name,state,questions", CASES[:4], ids=[c[0] for c in CASES[:4]])
def test_matches_the_reference(name, state, questions, clef_export, reference_model, ref, hf_tok):
    pipe = Pipeline(clef_export)
    request = body(state, questions, model="clef-flash")
    (prepared,), (logits,), _ = pipe.outputs([request])
    want = ref.systemone(reference_model, types.SimpleNamespace(tokenizer=hf_tok), request)
    got = pipe.model.finish(prepared, logits, "reference", "clef-flash", requested="clef-flash")
    for qid, answer in want["answers"].items():
        mine = got["answers"][qid]
        if answer["type"] == "choice":
            assert mine["choice"] == answer["choice"]
        for k, p in answer.get("probabilities", {}).items():
            assert abs(mine["probabilities"][k] - p) <= 2e-4          # one 4th-decimal rounding step
        if answer["type"] == "noul":
            assert abs(mine["noul"] - answer["noul"]) <= 2e-4
    assert got["usage"]["input_tokens"] == prepared.tokens


def test_requests_batched_together_never_mix(clef_export, tok):
    pipe = Pipeline(clef_export)
    requests = [body(s, q, model="clef-flash") for _, s, q in CASES[:3]]
    prepared, outputs, packed = pipe.outputs(requests)
    assert packed.meta["micro_batches"] == 3
    for request, prep, logits in zip(requests, prepared, outputs):
        (alone,), (solo,), _ = pipe.outputs([request])
        assert logits.shape == (len(prep.work.option_question),)
        assert np.abs(logits - solo).max() <= 1e-5
    # Each record is complete after its own run: the executor answers it then, from the runs so far.
    assert packed.ready == [0, 1, 2]
    raw = [pipe.session.run(None, feeds) for feeds in packed.parts]
    works = [p.work for p in prepared]
    (second,) = pipe.model.adapter.unpack(raw[:2], works, packed, only=[1])
    np.testing.assert_array_equal(second, outputs[1])


def test_served_over_http(clef_export, tmp_path):
    with run_server(tmp_path, {"OMNI_MODELS": clef_export}) as server:
        request = body(CASES[0][1], CASES[0][2], model="Cloudflare/clef-flash")
        r = httpx.post(server.url + "/v1/systemone", json=request, timeout=60)
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["model"] == "Cloudflare/clef-flash"          # the request's model, echoed
        assert set(out["answers"]) == set(request["questions"])
        assert out["answers"]["refund"]["type"] == "noul" and "confidence" not in out["answers"]["refund"]
        bad = httpx.post(server.url + "/v1/systemone", json=body("x", {
            "q": {"type": "choice", "instructions": "?", "criteria": {"only": "one"}}}, model="clef-flash"), timeout=30)
        assert bad.status_code == 422
        assert bad.headers["content-type"].startswith("application/problem+json")


def test_pass_probe_times_a_model_without_a_graph_policy(clef_export, tmp_path):
    """benchmarks.gpu.pass_probe runs Clef-Flash (no CUDA-graph policy) on its plain session, as
    the executor does: one record a micro-batch, nothing captured, every stage timed."""
    import json

    from benchmarks.gpu import pass_probe
    from benchmarks.make_workloads import HERE

    out = tmp_path / "probe.json"
    pass_probe.main(["--export", clef_export, "--device", "cpu", "--rows", "1,2", "--iters", "2", "--warmup", "1",
                     "--workload", HERE + "/clef_1q.jsonl", "--out", str(out)])
    cases = json.loads(out.read_text())["cases"]
    for n in ("1", "2"):
        assert not cases[n]["captured"] and cases[n]["p50_ms"]["run"] > 0
        assert cases[n]["p50_ms"]["pass"] >= cases[n]["p50_ms"]["run"]
