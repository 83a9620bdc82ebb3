"""Our torch-free pipeline (ONNX Runtime) against the model authors' `laya` 0.4.15 package."""

from __future__ import annotations

import warnings

import pytest

from models.render import json_key
from tests.models.laya.cases import CASES


def _reference(agent, state, questions):
    """What laya.serve answers: `Agent.system_one` plus `x_jev_confidence`."""
    from laya.serve import _add_jev_confidence

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _add_jev_confidence(agent.system_one(state, questions))


def _compare(ours: dict, ref: dict) -> None:
    assert list(ours["answers"]) == list(ref["answers"])  # request order
    for qid, a in ours["answers"].items():
        r = ref["answers"][qid]
        assert a["type"] == r["type"]
        assert set(a) == set(r), qid
        if a["type"] == "choice":
            assert a["choice"] == r["choice"]
        for key in ("probabilities", "legend"):
            if key in r:  # keys as laya.serve's JSON encoder writes them
                assert list(a[key]) == [json_key(k) for k in r[key]], (qid, key)
        if "legend" in r:
            assert a["legend"] == r["legend"]
        if "probabilities" in r:
            for (ka, va), vr in zip(a["probabilities"].items(), r["probabilities"].values()):
                assert abs(va - vr) <= 1e-4, (qid, ka, va, vr)
        for key in ("score", "noul", "confidence", "answer_confidence"):
            if key in r:
                assert abs(a[key] - r[key]) <= 2e-4, (qid, key, a[key], r[key])
        assert abs(a["action"]["act_probability"] - r["action"]["act_probability"]) <= 1e-4
    assert ours["usage"] == ref["usage"]


@pytest.mark.parametrize("name,state,questions", CASES, ids=[c[0] for c in CASES])
def test_english_matches_laya(name, state, questions, pipeline_english, laya_english):
    ours = pipeline_english({"state": state, "questions": questions})
    _compare(ours, _reference(laya_english, state, questions))


@pytest.mark.parametrize("name,state,questions", CASES[:8] + CASES[16:22], ids=[c[0] for c in CASES[:8] + CASES[16:22]])
def test_multilingual_matches_laya(name, state, questions, pipeline_multilingual, laya_multilingual):
    ours = pipeline_multilingual({"state": state, "questions": questions})
    _compare(ours, _reference(laya_multilingual, state, questions))


@pytest.mark.parametrize("name,state,questions", CASES, ids=[c[0] for c in CASES])
def test_token_ids_match_laya(name, state, questions, pipeline_english, laya_english):
    """Identical rows: token ids and marker positions, question by question."""
    agent = laya_english
    ids = list(questions)
    internal = {qid: agent._to_internal(questions[qid]) for qid in ids}
    expected = agent._encode_state(state, ids, internal)
    prepared = pipeline_english.model.prepare({"state": state, "questions": questions})
    assert [r.ids for r in prepared.work] == [e["ids"] for e in expected]
    assert [r.markers for r in prepared.work] == [e["markers"] for e in expected]
    assert [r.qtype for r in prepared.work] == [e["qtype"] for e in expected]


def test_routing_and_model_name(pipeline_english):
    out = pipeline_english({"model": "laya", "state": "x", "questions": {"q": {"type": "noul", "instructions": "ok?"}}})
    assert out["model"] == "english"
    assert out["routing"]["model"] == "english"
    assert out["routing"]["reason"] == "explicit model='laya'"
