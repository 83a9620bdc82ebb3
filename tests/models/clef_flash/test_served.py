"""Clef-Flash end to end: the tiny checkpoint exported as ONE graph (our backbone + the
masked-matmul head; several records a pass, or the clef-joint-v1 signature's one), run by ONNX
Runtime through the served model, against transformers' backbone + Cloudflare's reference head
(`systemone`); records of several requests never mix, batched or not; HTTP."""

from __future__ import annotations

import os
import pathlib
import types

import httpx
import numpy as np
import pytest
import torch

from models.placement import host_arithmetic
from tests.conftest import Pipeline, run_server

from .cases import CASES, body


@pytest.fixture(scope="module")
def reference_model(clef_dir, ref, ref_head):
    from transformers import Qwen3_5ForConditionalGeneration

    backbone = Qwen3_5ForConditionalGeneration.from_pretrained(clef_dir, dtype=torch.float32).eval()
    return ref.ClefModel(backbone, ref_head).eval()


def test_batched_records_are_one_checked_graph_of_their_own_signature(clef_batched):
    from models import manifest

    meta = manifest.read(clef_batched)
    assert meta["signature"] == "clef-joint-v1+records" and meta["export_options"]["records"] == "batched"
    assert meta["inputs"][-1] == "question_record" and meta["graph"]["check_max_abs_logit_diff"] < 1e-3
    # No shape arithmetic meets data (the head offset spans by record × width once): ONNX Runtime
    # ran that on the CPU and refused to capture the graph on the H200.
    assert host_arithmetic(os.path.join(clef_batched, meta["onnx"])) == [] == meta["host_arithmetic"]


def test_export_is_one_checked_graph(clef_export):
    from models import manifest

    meta = manifest.read(clef_export)
    assert meta["family"] == "clef_flash" and meta["signature"] == "clef-joint-v1"
    assert meta["export_options"]["records"] == "single" and meta["inputs"][-1] == "option_question"
    assert host_arithmetic(os.path.join(clef_export, meta["onnx"])) == []
    assert meta["graph"]["check_max_abs_logit_diff"] < 1e-3
    # The system turn and STATE: line are baked in (what the reference tests below then check).
    assert meta["export_options"]["prompt_head"] == "baked" and meta["prefix"]["tokens"] > 20


@pytest.mark.slow
def test_the_baked_head_is_cut_off_each_record_and_a_stale_head_refused(clef_export, tmp_path, tok):
    """The graph runs the ids after the head, with the whole record's positions and spans (the
    reference tests below check its answers); an export without a baked head (made before the
    exporter baked it) loads and is named; a baked head this server's prompt would not produce is
    refused at load."""
    import json
    import os
    import shutil

    from models.registry import load

    request = body(CASES[0][1], CASES[0][2], model="clef-flash")
    baked = Pipeline(clef_export)
    head = baked.model.adapter.head
    (prep,), _, packed = baked.outputs([request])
    feeds = packed.parts[0]
    assert feeds["input_ids"].shape[1] == prep.longest == -(-(prep.tokens - len(head)) // 64) * 64
    # The positions are the whole record's, right-padded with -1 to the head and the ids' width.
    positions = feeds["token_positions"]
    assert positions.shape == (len(head) + feeds["input_ids"].shape[1],)
    assert packed.real_tokens == prep.tokens - len(head)
    assert list(positions[: prep.tokens]) == list(range(prep.tokens)) and set(positions[prep.tokens :]) == {-1}
    headless = str(tmp_path / "clef-rows")
    shutil.copytree(clef_export, headless)
    meta = json.loads(pathlib.Path(os.path.join(headless, "manifest.json")).read_text())
    meta["prefix"] = None
    del meta["export_options"]["prompt_head"]
    pathlib.Path(os.path.join(headless, "manifest.json")).write_text(json.dumps(meta))
    whole = load(headless)
    assert whole.adapter.head == [] and whole.prepare(request).longest == -(-prep.tokens // 64) * 64
    (note,) = whole.notes()
    assert note.startswith("its graph runs the system turn in every record")
    stale = str(tmp_path / "clef-stale")
    shutil.copytree(clef_export, stale)
    meta = json.loads(pathlib.Path(os.path.join(stale, "manifest.json")).read_text())
    meta["prefix"]["ids"] = meta["prefix"]["ids"][:-1]
    pathlib.Path(os.path.join(stale, "manifest.json")).write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="export command again"):
        load(stale)


@pytest.mark.parametrize("records", ["batched", "single"])
@pytest.mark.parametrize("name,state,questions", CASES[:4], ids=[c[0] for c in CASES[:4]])
def test_matches_the_reference(
    name, state, questions, records, clef_export, clef_batched, reference_model, ref, hf_tok
):
    pipe = Pipeline(clef_batched if records == "batched" else clef_export)
    request = body(state, questions, model="clef-flash")
    (prepared,), (logits,), _ = pipe.outputs([request])
    want = ref.systemone(reference_model, types.SimpleNamespace(tokenizer=hf_tok), request)
    got = pipe.model.finish(prepared, logits, "reference", "clef-flash", requested="clef-flash")
    for qid, answer in want["answers"].items():
        mine = got["answers"][qid]
        if answer["type"] == "choice":
            assert mine["choice"] == answer["choice"]
        for k, p in answer.get("probabilities", {}).items():
            assert abs(mine["probabilities"][k] - p) <= 2e-4  # one 4th-decimal rounding step
        if answer["type"] == "noul":
            assert abs(mine["noul"] - answer["noul"]) <= 2e-4
    assert got["usage"]["input_tokens"] == prepared.tokens


@pytest.mark.parametrize("records", ["batched", "single"])
def test_requests_batched_together_never_mix(records, clef_export, clef_batched):
    """Records of several requests run as rows of one pass (or one pass each, clef-joint-v1): each
    record's logits are those it gets alone, within 1e-6 of its largest, and the adapter says
    after which pass each request is complete."""
    pipe = Pipeline(clef_batched if records == "batched" else clef_export)
    requests = [body(s, q, model="clef-flash") for _, s, q in CASES[:3]]
    prepared, outputs, packed = pipe.outputs(requests)
    assert packed.meta["micro_batches"] == (1 if records == "batched" else 3)
    for request, prep, logits in zip(requests, prepared, outputs):
        (alone,), (solo,), _ = pipe.outputs([request])
        assert logits.shape == (len(prep.work.option_question),)
        assert np.abs(logits - solo).max() <= 1e-6 * max(1.0, float(np.abs(solo).max()))
    assert packed.ready == ([0, 0, 0] if records == "batched" else [0, 1, 2])


def _pack(adapter, works, **limits):
    """The adapter's layout of the passes the batching policy cuts within `limits`."""
    from app.runtime.batching import micro_batches
    from models.base import MicroBatches

    lengths, owners = adapter.row_lengths(works)
    return adapter.pack(
        works,
        parts=micro_batches(
            lengths, owners, adapter.bucket, MicroBatches(**{"max_rows": 8, "max_tokens": 4096, **limits})
        ),
    )


def test_passes_of_records_within_the_budgets_answer_as_they_end(clef_batched):
    """A take cut into passes (here at most two records each): oldest first, each request
    complete after its own pass and answered from the passes run so far, the same logits."""
    from models.clef_flash.served import BatchedRecordAdapter

    pipe = Pipeline(clef_batched)
    requests = [body(s, q, model="clef-flash") for _, s, q in CASES[:5]]
    prepared, want, _ = pipe.outputs(requests)
    works = [p.work for p in prepared]
    adapter = BatchedRecordAdapter(pipe.model.pad_id, head=pipe.model.adapter.head)
    packed = _pack(adapter, works, max_rows=2)
    assert len(packed.parts) == 3 and all(p["input_ids"].shape[0] <= 2 for p in packed.parts)
    assert sorted(i for chunk in packed.layout for i in chunk) == list(range(5))
    assert [min(chunk) for chunk in packed.layout] == sorted(min(chunk) for chunk in packed.layout)
    raw = [pipe.session.run(None, feeds) for feeds in packed.parts]
    for p in range(3):
        done = [i for i, r in enumerate(packed.ready) if r == p]
        assert done and set(done) == set(packed.layout[p])
        for i, got in zip(done, adapter.unpack(raw[: p + 1], works, packed, only=done)):
            assert np.abs(got - want[i]).max() <= 1e-6 * max(1.0, float(np.abs(want[i]).max()))
    # A record's question and options point at its own row.
    feeds = packed.parts[0]
    counts = [len(works[i].question_types) for i in packed.layout[0]]
    assert list(feeds["question_record"]) == [b for b, n in enumerate(counts) for _ in range(n)]


def test_the_budgets_keep_a_long_record_from_padding_short_ones(clef_batched):
    """A record more than max_row_padding tokens longer than the others runs in a pass of its
    own; records of one width share one."""
    from models.clef_flash.served import BatchedRecordAdapter

    pipe = Pipeline(clef_batched)
    short = [body("Refund %d, please." % i, CASES[0][2], model="clef-flash") for i in range(3)]
    long = body("Refund it. " * 150, CASES[0][2], model="clef-flash")
    prepared, _, _ = pipe.outputs(short + [long])
    works = [p.work for p in prepared]
    adapter = BatchedRecordAdapter(pipe.model.pad_id, head=pipe.model.adapter.head)
    packed = _pack(adapter, works, max_row_padding=128)
    assert sorted(map(sorted, packed.layout)) == [[0, 1, 2], [3]]
    assert packed.padded_tokens == sum(int(np.prod(p["input_ids"].shape)) for p in packed.parts)


def test_served_over_http(clef_batched, tmp_path):
    with run_server(tmp_path, {"OMNI_MODELS": clef_batched}) as server:
        request = body(CASES[0][1], CASES[0][2], model="Cloudflare/clef-flash")
        r = httpx.post(server.url + "/v1/systemone", json=request, timeout=60)
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["model"] == "Cloudflare/clef-flash"  # the request's model, echoed
        assert set(out["answers"]) == set(request["questions"])
        assert out["answers"]["refund"]["type"] == "noul" and "confidence" not in out["answers"]["refund"]
        bad = httpx.post(
            server.url + "/v1/systemone",
            json=body(
                "x", {"q": {"type": "choice", "instructions": "?", "criteria": {"only": "one"}}}, model="clef-flash"
            ),
            timeout=30,
        )
        assert bad.status_code == 422
        assert bad.headers["content-type"].startswith("application/problem+json")


def test_padded_positions_give_the_unpadded_answers(clef_export):
    """The graph reads a record's length from its positions' values: padded with -1 (as served,
    so that records of one width share a CUDA graph) or not, the logits are the same."""
    from models import manifest

    assert manifest.read(clef_export)["export_options"]["token_positions"] == "padded"
    pipe = Pipeline(clef_export)
    for _, state, questions in CASES[:3]:
        (prep,), (logits,), packed = pipe.outputs([body(state, questions, model="clef-flash")])
        feeds = dict(packed.parts[0])
        assert feeds["token_positions"].shape[0] > prep.tokens  # padding happened
        feeds["token_positions"] = feeds["token_positions"][: prep.tokens]
        (plain,) = pipe.session.run(None, feeds)
        np.testing.assert_array_equal(logits, plain)


def test_an_export_that_reads_the_length_from_the_shape_runs_without_graphs(clef_export, clef_batched, tmp_path):
    """An export made before token_positions could be padded (one record a pass): no graph
    policy, positions as long as the record, notes naming the export command; the same answers.
    A single-record export with padded positions bounds each record as its own pass; the batched
    one, a take. All three give the same answers."""
    import json
    import os
    import shutil

    older = str(tmp_path / "clef-older")
    shutil.copytree(clef_export, older)
    meta = json.loads(pathlib.Path(os.path.join(older, "manifest.json")).read_text())
    del meta["export_options"]["token_positions"], meta["export_options"]["records"]
    pathlib.Path(os.path.join(older, "manifest.json")).write_text(json.dumps(meta))
    old, single, new = Pipeline(older), Pipeline(clef_export), Pipeline(clef_batched)
    assert old.model.cuda_graphs is None and single.model.cuda_graphs.per_work
    assert new.model.cuda_graphs is not None and not new.model.cuda_graphs.per_work
    assert new.model.notes() == single.model.notes() == []
    assert any("without CUDA graphs" in n and "export command" in n for n in old.model.notes())
    request = body(CASES[1][1], CASES[1][2], model="clef-flash")
    (prep,), (got,), packed = old.outputs([request])
    assert packed.parts[0]["token_positions"].shape == (prep.tokens,)
    np.testing.assert_array_equal(got, single.outputs([request])[1][0])
    want = new.outputs([request])[1][0]
    assert np.abs(got - want).max() <= 1e-6 * max(1.0, float(np.abs(want).max()))


def _two_shapes() -> list[dict]:
    """Two states of one padded width and one schema (one shape), and a third schema (another)."""
    return [
        body("Please refund the duplicate charge.", CASES[0][2], model="clef-flash"),
        body("Please refund the second charge.", CASES[0][2], model="clef-flash"),
        body(CASES[1][1], CASES[1][2], model="clef-flash"),
    ]


def test_records_of_one_shape_share_a_graph_whatever_the_batch(clef_export):
    """A single-record export under the executor: each record of a batch is bounded as the pass it runs alone
    (GraphPolicy.per_work): records whose padded shape recurs are captured between passes and replayed
    (GraphRunner, bound on the CPU here: the same bookkeeping, no capture) even where the
    batch's rows × longest row is past the token bound, and the answers are the plain
    session's. A policy that bounded the batch would have run them uncaptured."""
    import asyncio
    import dataclasses
    import time

    from app.runtime.sessions import GraphRunner
    from tests.conftest import Harness

    h = Harness([clef_export])
    try:
        slot = h.slot("clef-flash")
        plain = slot.session
        bodies = _two_shapes()
        prepared = [slot.model.prepare(b) for b in bodies]
        keys = [GraphRunner.shape_key(slot.model.adapter.pack([p.work]).feeds) for p in prepared]
        assert keys[0] == keys[1] != keys[2]
        want = [plain.run(None, slot.model.adapter.pack([p.work]).feeds)[0] for p in prepared]

        def batch(policy):
            slot.model.cuda_graphs = policy
            slot.session, slot.static_shapes = GraphRunner(plain, 0, 8, capture_after=2, device="cpu"), True

            async def main():
                with h.executor._cv:  # queued together: one batch of three records
                    jobs = [h.executor.submit(slot, slot.model.prepare(b)) for b in bodies]
                return [await j.future for j in jobs]

            return asyncio.run(main()), slot.session

        bound = prepared[0].longest * 2  # one record fits; the batch of three does not
        h.executor.captures.share = 1.0  # no rest between captures
        outs, runner = batch(dataclasses.replace(slot.model.graph_policy, max_tokens=bound))
        for _ in range(400):  # the second sighting is due, captured between passes
            if keys[0] in runner.graphs:
                break
            time.sleep(0.05)
        assert list(runner.graphs) == [keys[0]] and runner.pending == {}
        assert runner.sightings == {keys[2]: 1}
        for got, ref in zip(outs, want):
            np.testing.assert_array_equal(got, ref)
        outs, runner = batch(dataclasses.replace(slot.model.graph_policy, max_tokens=bound, per_work=False))
        assert runner.graphs == {} and runner.sightings == {}  # the batch ran uncaptured
        for got, ref in zip(outs, want):
            np.testing.assert_array_equal(got, ref)
    finally:
        h.close()


def test_a_take_of_records_runs_as_one_pass_under_the_executor(clef_batched):
    """Under the executor, records queued together run as one pass (one micro-batch, rows = the
    records), a take's shape due on its second sighting, captured between passes and replayed
    (GraphRunner, bound on the CPU here), and every answer is the record's own, as it gets alone."""
    import asyncio
    import time

    from app.runtime.sessions import GraphRunner
    from tests.conftest import Harness

    h = Harness([clef_batched])
    try:
        slot = h.slot("clef-flash")
        plain = slot.session
        bodies = _two_shapes()
        want = [plain.run(None, slot.model.adapter.pack([slot.model.prepare(b).work]).feeds)[0] for b in bodies]
        slot.session, slot.static_shapes = GraphRunner(plain, 0, 8, capture_after=2, device="cpu"), True
        start = len(h.batches)

        async def main():
            with h.executor._cv:  # queued together: one take of three records
                jobs = [h.executor.submit(slot, slot.model.prepare(b)) for b in bodies]
            return [await j.future for j in jobs]

        h.executor.captures.share = 1.0  # no rest between captures
        for sighting in (1, 2, 3):
            outs = asyncio.run(main())
            for got, ref in zip(outs, want):
                assert np.abs(got - ref).max() <= 1e-6 * max(1.0, float(np.abs(ref).max()))
            if sighting == 2:
                for _ in range(400):  # due now: captured between passes
                    if slot.session.graphs:
                        break
                    time.sleep(0.05)
            assert len(slot.session.graphs) == (0 if sighting == 1 else 1)
        for _ in range(100):  # the batch callback runs just after the answers are settled
            if len(h.batches) - start == 3:
                break
            time.sleep(0.05)
        assert [(b.rows, b.meta["micro_batches"]) for b, _ in h.batches[start:]] == [(3, 1)] * 3
    finally:
        h.close()
