"""Open-Jev end to end on a tiny random package (base + rank-8 LoRA + scalar head): export with
the adapter merged, then ONNX Runtime through the served model against transformers + PEFT
(adapter unmerged) with the same head and calibration, batching invariance, and HTTP."""
from __future__ import annotations

import os

import httpx
import numpy as np
import pytest
import torch

from models.open_jev import finish as finishing
from tests.conftest import Pipeline, run_server

REQUEST = {
    "model": "open-jev-9b",
    "state": {"z": [1.0, 1e16, -0.0, True, None, "猫"], "a": {"β": "z", "a": "first"},
              "ticket": "I was charged twice for my order; please refund the duplicate today. " * 3},
    "questions": {
        "route": {"type": "choice", "instructions": "Which team should handle this?",
                  "criteria": {"billing": "Charges and refunds", "security": None, "technical": {"area": "software"}}},
        "refund_review": {"type": "noul", "instructions": "Does the customer ask for a refund?",
                          "criteria": {"true": "Money back", "false": "No refund"}},
        "plain": {"type": "noul", "instructions": "Is the customer polite?"},
        "urgency": {"type": "score", "instructions": "How urgent is it?", "criteria": ["Low", "Medium", "High"]},
    },
}
SHORT = {"model": "open-jev-9b", "state": "Short.", "questions": {
    "q": {"type": "choice", "instructions": "Pick one.", "criteria": {"a": "First", "b": "Second"}}}}


@pytest.fixture(scope="module")
def jev_export(package, tmp_path_factory):
    from models.open_jev import export

    out = str(tmp_path_factory.mktemp("open-jev-export"))
    export.export(package, out, base=os.path.join(os.path.dirname(package), "base"), progress=None)
    return out


@pytest.fixture(scope="module")
def reference(package):
    """transformers' text model with the PEFT adapter unmerged, fp32."""
    from peft import PeftModel
    from transformers import AutoModelForImageTextToText

    full = AutoModelForImageTextToText.from_pretrained(os.path.join(os.path.dirname(package), "base"),
                                                       dtype=torch.float32)
    return PeftModel.from_pretrained(full.model.language_model, os.path.join(package, "adapter")).eval()


def test_export_manifest_and_names(jev_export):
    from models import manifest

    meta = manifest.read(jev_export)
    assert meta["family"] == "open_jev" and meta["name"] == "open-jev-9b"
    assert "Qwen/Qwen3.5-9B" in meta["aliases"] and "open-jev" in meta["aliases"]
    assert meta["merged_modules"] > 0 and meta["random_weights"] is True
    assert meta["graph"]["check_max_abs_diff"] < 1e-3


def test_probabilities_match_transformers_with_peft(jev_export, reference):
    pipe = Pipeline(jev_export)
    (prepared,), ((hidden,),), _ = pipe.outputs([REQUEST])
    assert prepared.rows == 3 + 1 + 1 + 3
    want = []
    with torch.no_grad():
        for ids in prepared.work:
            want.append(reference(input_ids=torch.from_numpy(np.asarray(ids, dtype=np.int64))[None]).last_hidden_state[0, -1].numpy())
    want = np.stack(want)
    assert np.abs(hidden - want).max() <= 1e-4 * np.abs(want).max()
    ours = finishing.finish(prepared.context, hidden)
    ref = finishing.finish(prepared.context, want.astype(np.float32))
    for qid, answer in ours["answers"].items():
        if answer["type"] == "noul":
            assert abs(answer["noul"] - ref["answers"][qid]["noul"]) <= 1e-4
        else:
            for k, p in answer["probabilities"].items():
                assert abs(p - ref["answers"][qid]["probabilities"][k]) <= 1e-4
    assert ours["model"] == "Qwen/Qwen3.5-9B" and ours["metadata"]["candidate_sequences"] == 8


def test_batched_and_alone_agree(jev_export):
    pipe = Pipeline(jev_export)
    prepared, outputs, packed = pipe.outputs([REQUEST, SHORT, REQUEST])
    assert packed.real_tokens == sum(p.tokens for p in prepared)
    for body, prep, out in zip([REQUEST, SHORT, REQUEST], prepared, outputs):
        together = pipe.model.finish(prep, out, "reference", pipe.model.name)
        alone = pipe(body)
        for qid, answer in alone["answers"].items():
            if answer["type"] == "noul":
                assert abs(answer["noul"] - together["answers"][qid]["noul"]) <= 1e-6
            else:
                assert max(abs(answer["probabilities"][k] - together["answers"][qid]["probabilities"][k])
                           for k in answer["probabilities"]) <= 1e-6


def test_served_over_http(jev_export, tmp_path):
    with run_server(tmp_path, {"OMNI_MODELS": jev_export}) as server:
        r = httpx.post(server.url + "/v1/systemone", json=REQUEST, timeout=60)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["model"] == "Qwen/Qwen3.5-9B"
        assert set(body["answers"]) == set(REQUEST["questions"])
        assert 0.0 <= body["answers"]["plain"]["noul"] <= 1.0
        assert body["metadata"]["temperature"] == 1.8969118766347646
        assert body["usage"]["output_tokens"] == 0
        for name in ("open-jev", "Qwen/Qwen3.5-9B", "jev-latest"):
            assert httpx.post(server.url + "/v1/systemone", json=dict(SHORT, model=name), timeout=30).status_code == 200
        long = dict(SHORT, state="word " * 5000)
        r = httpx.post(server.url + "/v1/systemone", json=long, timeout=60)
        assert r.status_code == 413 and r.json()["code"] == "input_too_long"
        assert "no silent truncation" in r.json()["detail"]
        r = httpx.post(server.url + "/v1/systemone", json=dict(SHORT, questions={
            "s": {"type": "score", "instructions": "?", "criteria": ["only one"]}}), timeout=30)
        assert r.status_code == 422
