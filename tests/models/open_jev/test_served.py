"""Open-Jev end to end on a tiny random package (base + rank-8 LoRA + scalar head): export with
the adapter merged, then ONNX Runtime through the served model against transformers + PEFT
(adapter unmerged) with the same head and calibration, batching invariance, and HTTP."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import httpx
import numpy as np
import pytest
import torch

from models.errors import InferenceFailed
from models.open_jev import finish as finishing
from tests.conftest import Pipeline, run_server

REQUEST = {
    "model": "open-jev-9b",
    "state": {
        "z": [1.0, 1e16, -0.0, True, None, "猫"],
        "a": {"β": "z", "a": "first"},
        "ticket": "I was charged twice for my order; please refund the duplicate today. " * 3,
    },
    "questions": {
        "route": {
            "type": "choice",
            "instructions": "Which team should handle this?",
            "criteria": {"billing": "Charges and refunds", "security": None, "technical": {"area": "software"}},
        },
        "refund_review": {
            "type": "noul",
            "instructions": "Does the customer ask for a refund?",
            "criteria": {"true": "Money back", "false": "No refund"},
        },
        "plain": {"type": "noul", "instructions": "Is the customer polite?"},
        "urgency": {"type": "score", "instructions": "How urgent is it?", "criteria": ["Low", "Medium", "High"]},
    },
}
SHORT = {
    "model": "open-jev-9b",
    "state": "Short.",
    "questions": {"q": {"type": "choice", "instructions": "Pick one.", "criteria": {"a": "First", "b": "Second"}}},
}


@pytest.fixture(scope="module")
def reference(package):
    """transformers' text model with the PEFT adapter unmerged, fp32."""
    from peft import PeftModel
    from transformers import AutoModelForImageTextToText

    full = AutoModelForImageTextToText.from_pretrained(
        os.path.join(os.path.dirname(package), "base"), dtype=torch.float32
    )
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
            row = torch.from_numpy(np.asarray(ids, dtype=np.int64))[None]
            want.append(reference(input_ids=row).last_hidden_state[0, -1].numpy())
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
    # Every row's tokens run once, except the shared prompt head, which runs once a part.
    head, parts = packed.meta["head_tokens"], len(packed.parts or [packed.feeds])
    assert head > 0 and packed.real_tokens == sum(p.tokens for p in prepared) - packed.rows * head + parts * head
    for body, prep, out in zip([REQUEST, SHORT, REQUEST], prepared, outputs):
        together = pipe.model.finish(prep, out, "reference", pipe.model.name)
        alone = pipe(body)
        for qid, answer in alone["answers"].items():
            if answer["type"] == "noul":
                assert abs(answer["noul"] - together["answers"][qid]["noul"]) <= 1e-6
            else:
                assert (
                    max(
                        abs(answer["probabilities"][k] - together["answers"][qid]["probabilities"][k])
                        for k in answer["probabilities"]
                    )
                    <= 1e-6
                )


def test_served_over_http(jev_export, tmp_path):
    from benchmarks import scrape

    with run_server(tmp_path, {"OMNI_MODELS": jev_export}) as server:
        series = ("omni_input_tokens_total", "omni_batch_run_tokens_total")
        before = scrape.totals(server.url, series)
        r = httpx.post(server.url + "/v1/systemone", json=REQUEST, timeout=60)
        assert r.status_code == 200, r.text
        body = r.json()
        # Usage counts every candidate's whole prompt; the pass ran their shared head once.
        after = scrape.totals(server.url, series)
        served, ran = (after[k] - before[k] for k in series)
        assert served == body["usage"]["input_tokens"] and 0 < ran < served / 2
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
        r = httpx.post(
            server.url + "/v1/systemone",
            json=dict(SHORT, questions={"s": {"type": "score", "instructions": "?", "criteria": ["only one"]}}),
            timeout=30,
        )
        assert r.status_code == 422
        # The jev profile takes what the hosted Jev API does: one-sided criteria, no instructions.
        jev = dict(
            SHORT,
            questions={
                "t": {"type": "noul", "instructions": "Refund?", "criteria": {"true": "Money"}},
                "c": {"type": "noul", "criteria": {"false": "No refund"}},
            },
        )
        r = httpx.post(server.url + "/v1/systemone", json=jev, headers={"prefer": "profile=jev"}, timeout=30)
        assert r.status_code == 200, r.text
        assert all(0.0 <= a["noul"] <= 1.0 for a in r.json()["answers"].values())
        r = httpx.post(server.url + "/v1/systemone", json=jev, timeout=30)
        assert r.status_code == 422 and [e["question"] for e in r.json()["errors"]] == ["t", "c"]


class _SlowLaterParts:
    """The session, with every part after the first held back 0.3 s (or failed): a take of two
    requests whose two parts' ends are in view."""

    def __init__(self, session, fail: bool = False):
        self.session, self.fail, self.parts = session, fail, []

    def run(self, names, feeds):
        start = time.perf_counter()
        if self.parts:
            time.sleep(0.3)
            if self.fail:
                raise RuntimeError("injected failure of a later part")
        out = self.session.run(names, feeds)
        self.parts.append((feeds["input_ids"].shape, start, time.perf_counter()))
        return out


# One noul each: requests of one row share passes (a request of several rows runs in a pass of
# its own, its candidates after their shared head: SharedHeadAdapter).
ONE_ROW = {"model": "open-jev-9b", "state": "Short.", "questions": {"q": {"type": "noul", "instructions": "Late?"}}}
LONG = dict(ONE_ROW, state="word " * 700)


def _taken_together(jev_export, bodies, fail: bool):
    """Two one-row requests of far-apart lengths queued together, so that one take runs them as
    two micro-batches: (pipeline, prepared, jobs, outcomes, the loop's time each was answered, parts)."""
    from app.config import Settings
    from app.runtime.executor import Executor
    from app.runtime.registry import Registry
    from models.registry import load

    registry = Registry([load(jev_export)])
    loaded = threading.Event()
    executor = Executor(Settings(models=(jev_export,)), on_loaded=lambda s: loaded.set())
    executor.start(registry.slots)
    assert loaded.wait(60)
    slot = registry.slots[0]
    prepared = [slot.model.prepare(b) for b in bodies]
    assert abs(prepared[0].longest - prepared[1].longest) > 300  # past max_row_padding: two parts
    slot.session = _SlowLaterParts(slot.session, fail=fail)

    async def main():
        with executor._cv:  # both queued before the thread can take either
            jobs = [executor.submit(slot, p) for p in prepared]
        answered = {}
        for i, job in enumerate(jobs):
            job.future.add_done_callback(lambda f, i=i: answered.setdefault(i, time.perf_counter()))
        outcomes = await asyncio.gather(*(j.future for j in jobs), return_exceptions=True)
        return jobs, outcomes, answered

    try:
        jobs, outcomes, answered = asyncio.run(main())
    finally:
        executor.stop()
    return Pipeline(jev_export), prepared, jobs, outcomes, answered, slot.session.parts


def test_the_older_request_of_a_take_is_answered_after_its_own_micro_batch(jev_export):
    bodies = [ONE_ROW, LONG]
    pipe, prepared, jobs, outcomes, answered, parts = _taken_together(jev_export, bodies, fail=False)
    assert jobs[0].batch is jobs[1].batch and jobs[0].batch.meta["micro_batches"] == 2
    assert jobs[0].batch.forward_s >= 0.3  # both parts' runs, the held-back one's too
    (first_shape, _, _), (second_shape, second_start, second_end) = parts
    # The older request's part ran first.
    assert first_shape[1] >= prepared[0].longest and second_shape[1] >= prepared[1].longest
    assert first_shape[1] < second_shape[1]
    assert answered[0] < second_end  # answered while the other's part still ran
    assert jobs[0].ran <= second_start < second_end <= jobs[1].ran
    _same_answers(pipe, bodies, prepared, outcomes)


def test_a_cheap_request_queued_behind_a_long_one_runs_first_in_a_pass_of_its_own(jev_export):
    """Admission by cost (app/runtime/batching.py): the short request, at most an eighth of the
    long one's cost, leads the next pass and the long one does not join it."""
    bodies = [LONG, ONE_ROW]
    pipe, prepared, jobs, outcomes, answered, parts = _taken_together(jev_export, bodies, fail=False)
    assert jobs[0].batch is not jobs[1].batch
    assert jobs[1].batch.rows == prepared[1].rows and jobs[0].batch.rows == prepared[0].rows
    assert answered[1] < answered[0] and jobs[1].ran <= jobs[0].ran
    _same_answers(pipe, bodies, prepared, outcomes)


def _same_answers(pipe, bodies, prepared, outcomes) -> None:
    for body, prep, out in zip(bodies, prepared, outcomes):
        want = pipe(body)["answers"]["q"]["noul"]
        got = pipe.model.finish(prep, out, "reference", pipe.model.name)["answers"]["q"]["noul"]
        assert abs(want - got) <= 1e-6


def test_a_failed_micro_batch_fails_only_the_requests_not_yet_answered(jev_export):
    _, _, jobs, outcomes, _, parts = _taken_together(jev_export, [ONE_ROW, LONG], fail=True)
    assert len(parts) == 1  # the first part ran; the second raised
    assert isinstance(outcomes[1], InferenceFailed)
    assert isinstance(outcomes[0], tuple) and np.isfinite(outcomes[0][0]).all()


def test_a_request_of_several_rows_runs_its_shared_head_once_in_a_pass_of_its_own(jev_export):
    """The export's graph takes a prompt head per pass: a request's candidates share their chat
    turn and state, which run once; requests of one row share passes behind the model's fixed
    head. Answers are those of each request alone, and no shape is captured (a pass's shape holds
    its head's length)."""
    from models.qwen35 import prefix
    from models.qwen35.rows import SharedHeadAdapter

    pipe = Pipeline(jev_export)
    model = pipe.model
    assert isinstance(model.adapter, SharedHeadAdapter) and model.cuda_graphs is None
    assert model.adapter.capture_batches(16, 0) == []
    several, one, other = (model.prepare(b) for b in (REQUEST, ONE_ROW, LONG))
    assert several.rows > 1 and one.rows == other.rows == 1
    # Several rows: a pass of their own; one row: any pass of one-row requests.
    again = model.prepare(REQUEST)
    assert model.adapter.compatible(several) not in (model.adapter.compatible(one), model.adapter.compatible(again))
    assert model.adapter.compatible(one) == model.adapter.compatible(other)
    packed = model.adapter.pack([several.work])
    head = packed.feeds["head_ids"][0].tolist()
    rows = [r.tolist() for r in several.work]
    assert head == rows[0][: prefix.common(rows)] and len(head) > 100  # the chat turn and the state
    assert packed.feeds["input_ids"].shape[1] == model.adapter.bucket(max(map(len, rows)) - len(head))
    packed = model.adapter.pack([one.work, other.work])
    assert packed.feeds["head_ids"][0].tolist() == model.adapter.fixed
    prepared, outputs, _ = pipe.outputs([ONE_ROW, LONG])
    for body, prep, out in zip([ONE_ROW, LONG], prepared, outputs, strict=True):
        together = model.finish(prep, out, "reference", model.name)["answers"]["q"]["noul"]
        assert abs(together - pipe(body)["answers"]["q"]["noul"]) <= 1e-6


def test_an_export_without_a_shared_head_keeps_its_rows_whole_and_captures_one_row_shapes(jev_export, tmp_path):
    """An export written before graphs took a head per pass (no `shared_head` in its manifest)
    is served as it was: one whole row per candidate, its one-row shapes captured at load."""
    import json
    import shutil

    from models import manifest
    from models.open_jev.served import OpenJevModel
    from models.qwen35.rows import SharedHeadAdapter

    meta = manifest.read(jev_export)
    del meta["graph"]["shared_head"]
    copy = str(tmp_path / "older")
    shutil.copytree(jev_export, copy)
    model = OpenJevModel(copy, json.loads(json.dumps(meta)))
    assert not isinstance(model.adapter, SharedHeadAdapter)
    assert model.cuda_graphs.precapture and model.cuda_graphs.capture_after == 2
    assert model.adapter.capture_batches(16, model.cuda_graphs.max_tokens)
