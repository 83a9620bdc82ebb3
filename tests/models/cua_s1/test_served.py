"""Cua-S1 end to end on a tiny random base + random `text/` LoRA: export (adapter merged), then
ONNX Runtime through the served model's prepare/pack/finish against transformers + PEFT (the
adapter unmerged, its LoRA branch in fp32), and over HTTP from a real Granian server."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
import torch

from models import gdn_plan
from models.cua_s1 import finish as finishing
from tests.conftest import Pipeline, run_server

REQUESTS = [
    {
        "model": "cua-s1-4b-0.2",
        "state": "Dialog: Delete 3 files permanently? Buttons: Delete, Cancel",
        "questions": {
            "pick": {
                "type": "choice",
                "instructions": "Keep the files.",
                "criteria": {"delete": "Click Delete", "cancel": "Click Cancel"},
            }
        },
    },
    {
        "model": "cua-s1-4b-0.2",
        "state": {
            "window": "Settings",
            "tree": ["button 'Save'", "link 'Help'", "textbox 'Email' empty"],
            "focused": None,
        },
        "questions": {
            "next": {
                "type": "choice",
                "instructions": None,
                "criteria": {"save": "Click Save", "help": None, "email": {"type": "Email", "n": 3}},
            },
            "alt": {
                "type": "choice",
                "instructions": "Get help. " * 30,
                "criteria": {k: "Option %s" % k for k in "abcdefghij"},
            },
            "one": {"type": "choice", "instructions": "", "criteria": {"only": "The only option"}},
        },
    },
]


@pytest.fixture(scope="module")
def reference(random_cua):
    """transformers' causal LM with the PEFT adapter applied unmerged, fp32."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(random_cua.base, dtype=torch.float32)
    return PeftModel.from_pretrained(base, random_cua.text).eval()


def test_export_merges_the_adapter_and_records_it(cua_export):
    from models import manifest

    meta = manifest.read(cua_export)
    assert meta["family"] == "cua_s1" and meta["random_weights"] is True
    assert meta["lora"]["r"] == 16 and meta["merged_modules"] > 0
    assert meta["graph"]["check_max_abs_diff"] < 1e-3


def test_onnx_matches_transformers_with_peft(cua_export, reference):
    pipe = Pipeline(cua_export)
    prepared, outputs, packed = pipe.outputs(REQUESTS)
    # The graph has the system turn baked in: it runs each row after it, and transformers below
    # reads the whole prompt.
    head = pipe.model.adapter.head
    assert len(head) > 50 and all(list(w[: len(head)]) == head for p in prepared for w in p.work)
    assert packed.real_tokens == sum(p.tokens for p in prepared) - len(head) * sum(p.rows for p in prepared)
    for prep, (hidden,) in zip(prepared, outputs):
        ours = finishing.letter_logits(hidden, pipe.model.letter_rows)
        for i, question in enumerate(prep.context.questions):
            ids = torch.tensor([prep.work[i]])
            with torch.no_grad():
                want = reference(input_ids=ids).logits[0, -1, 32:58].double().numpy()
            n = len(question.keys)
            got = ours[i].astype(np.float64)
            assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
            p_ref = np.exp(want[:n] - want[:n].max())
            p_ref /= p_ref.sum()
            assert np.abs(finishing.probabilities(got[:n], bf16=False) - p_ref).max() <= 1e-4


def _reference_probabilities(reference, prep, i, n):
    with torch.no_grad():
        logits = reference(input_ids=torch.tensor([prep.work[i]])).logits[0, -1, 32 : 32 + n].double().numpy()
    p = np.exp(logits - logits.max())
    return p / p.sum()


def test_a_float32_export_answers_as_the_unmerged_float32_reference(cua_export, reference):
    """What the server answers for a float32 export (merged weights kept in float32, the readout
    unrounded) matches the authors' reference, the adapter unmerged in float32, within 1e-4 in
    probability; rounding the merged weights or the logits to bfloat16 costs about 2e-3 here."""
    pipe = Pipeline(cua_export)
    worst = 0.0
    for body in REQUESTS:
        (prep,), _, _ = pipe.outputs([body])
        answers = pipe(body)["answers"]
        for i, (qid, question) in enumerate(zip(body["questions"], prep.context.questions)):
            want = _reference_probabilities(reference, prep, i, len(question.keys))
            got = np.array([answers[qid]["probabilities"][k] for k in body["questions"][qid]["criteria"]])
            worst = max(worst, float(np.abs(got - want).max()))
    assert worst <= 1e-4, worst


def test_answers_do_not_depend_on_batch_mates(cua_export):
    pipe = Pipeline(cua_export)
    together = [pipe.model.finish(p, o, "reference", pipe.model.name) for p, o in zip(*pipe.outputs(REQUESTS)[:2])]
    alone = [pipe(body) for body in REQUESTS]
    for a, b in zip(alone, together):
        for qid in a["answers"]:
            pa, pb = a["answers"][qid]["probabilities"], b["answers"][qid]["probabilities"]
            assert max(abs(pa[k] - pb[k]) for k in pa) <= 1e-6


def test_served_over_http(cua_export, tmp_path):
    with run_server(tmp_path, {"OMNI_MODELS": cua_export}) as server:
        r = httpx.post(server.url + "/v1/systemone", json=REQUESTS[0], timeout=30)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["model"] == "cua-ai/cua-s1-4b-0.2@16818868b0cc7813808aae4e87b417657046ab79:text"
        pick = body["answers"]["pick"]
        assert pick["choice"] in ("delete", "cancel")
        assert abs(sum(pick["probabilities"].values()) - 1) < 1e-6
        assert body["usage"]["output_tokens"] == 0 and body["usage"]["input_tokens"] > 50
        assert body["served_by"]["random_weights"] is True
        assert "Server-Timing" in r.headers
        bad = httpx.post(
            server.url + "/v1/systemone",
            json={**REQUESTS[0], "questions": {"q": {"type": "noul", "instructions": "Is it?"}}},
            timeout=30,
        )
        assert bad.status_code == 422 and bad.headers["content-type"].startswith("application/problem+json")
        models = httpx.get(server.url + "/v1/models", timeout=10).json()
        assert "cua-s1-4b-0.2" in str(models)


def test_a_float32_export_gets_a_gated_delta_net_engine_that_takes_float32(cua_export, monkeypatch):
    """ONNX Runtime's chunked GatedDeltaNet engines (chunked_split is the configured default) take
    float16 only: forced onto a float32 graph, every pass fails on CUDA. A float32 export, which
    is what a half-precision export that fails its gate falls back to, is built with ONNX
    Runtime's own choice, and so is a bfloat16 one; float16 exports keep the configured engine."""
    from app.runtime import sessions
    from tests.conftest import Harness

    plans = []
    create = sessions.create

    def spy(*args, **kwargs):
        plans.append(kwargs["gdn_plan"])
        return create(*args, **kwargs)

    monkeypatch.setattr(sessions, "create", spy)
    harness = Harness([cua_export])
    try:
        assert harness.settings.cuda_gdn_plan == "chunked_split"
        assert plans == ["auto"]
        assert harness.slot("cua-s1-4b-0.2").state.value in ("warming", "ready")
    finally:
        harness.close()
    for plan in ("chunked", "chunked_split"):
        assert gdn_plan.plan_for(plan, "float32") == gdn_plan.plan_for(plan, "bfloat16") == "auto"
        assert gdn_plan.plan_for(plan, "float16") == plan
    assert gdn_plan.plan_for("recurrent", "float32") == "recurrent"
    # What the plan is judged on: the dtype the GatedDeltaNet layers read, where the manifest
    # records it (a bfloat16 graph casting them to float16), else the weights' (older exports).
    assert gdn_plan.gdn_dtype({"weights_dtype": "bfloat16", "graph": {"gdn_dtype": "float16"}}) == "float16"
    assert gdn_plan.gdn_dtype({"weights_dtype": "bfloat16", "graph": {"gdn_kernel": "gated_delta_net"}}) == "bfloat16"
    assert gdn_plan.gdn_dtype({}) == "float32"
    # The log says why an export does not get the configured engine, and how an old bfloat16
    # export (no record of what its GatedDeltaNet reads, or recorded as bfloat16) would.
    old = {"weights_dtype": "bfloat16", "graph": {"gdn_kernel": "gated_delta_net_fused"}}
    note = gdn_plan.plan_note(old, "chunked_split", gdn_plan.plan_for("chunked_split", gdn_plan.gdn_dtype(old)))
    assert note.startswith("its GatedDeltaNet layers read bfloat16") and "running its export command again" in note
    kept = {"weights_dtype": "bfloat16", "graph": {"gdn_kernel": "gated_delta_net_fused", "gdn_dtype": "bfloat16"}}
    note = gdn_plan.plan_note(kept, "chunked_split", "auto")
    assert "not chunked_split (float16 only)" in note and "running its export command again" in note
    f32 = {"weights_dtype": "float32", "graph": {"gdn_kernel": "gated_delta_net_fused"}}
    assert "again" not in gdn_plan.plan_note(f32, "chunked_split", "auto")
    new = {"weights_dtype": "bfloat16", "graph": {"gdn_kernel": "gated_delta_net_fused", "gdn_dtype": "float16"}}
    assert gdn_plan.plan_note(new, "chunked_split", "chunked_split") is None
    assert gdn_plan.plan_note({"graph": {"gdn_kernel": "linear_attention"}}, "chunked_split", "auto") is None


def test_one_row_shapes_are_captured_as_it_loads_and_requests_replay_them(cua_export, monkeypatch):
    """Cua-S1 captures its one-row shapes as the model loads (GraphRunners on the CPU here: the
    bookkeeping of CUDA graphs, no CUDA), shortest first: a one-question request then replays a
    graph without counting a sighting and answers as the plain session does."""
    from app.config import Settings
    from app.runtime import sessions
    from app.runtime.batching import BatchPolicy
    from tests.conftest import Harness

    pipe = Pipeline(cua_export)
    model = pipe.model
    assert model.cuda_graphs.precapture and model.cuda_graphs.capture_after == 2
    listed = model.adapter.capture_batches(Settings().cuda_graph_rows, model.cuda_graphs.max_tokens)
    runner = sessions.GraphRunner(pipe.session, 0, 64, capture_after=2, device="cpu")
    count, took = BatchPolicy(max_rows=256, max_tokens=1 << 17, graph_rows=16).precapture(runner, model, 600.0)
    assert count == len(listed) == len(runner.graphs) == 47 and runner.pending == {} and took > 0

    body = REQUESTS[0]
    prepared = model.prepare(body)
    packed = model.adapter.pack([prepared.work], static=True)
    assert packed.feeds["input_ids"].shape[0] == 1
    (output,) = model.adapter.unpack([runner.run(None, packed.feeds)], [prepared.work], packed)
    assert runner.sightings == {} and runner.pending == {}  # replayed: nothing counted
    got = model.finish(prepared, output, "reference", model.name)["answers"]["pick"]["probabilities"]
    want = pipe(body)["answers"]["pick"]["probabilities"]
    assert max(abs(got[k] - want[k]) for k in want) <= 1e-6

    # The executor does the same as it loads, before the warm-up request.
    plain = sessions.create

    def with_graphs(path, device="auto", *args, **kwargs):
        info = plain(path, "cpu")
        return sessions.SessionInfo(
            sessions.GraphRunner(info.session, 0, 64, capture_after=2, device="cpu"),
            "cpu",
            info.provider,
            info.runtime,
            static_shapes=True,
        )

    monkeypatch.setattr(sessions, "create", with_graphs)
    h = Harness([cua_export])
    try:
        slot = h.slot(model.name)
        assert slot.graphs_captured >= 1 and slot.capture_s > 0
        assert slot.graphs_captured + len(slot.session.pending) == len(listed)
    finally:
        h.close()
