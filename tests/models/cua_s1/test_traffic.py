"""benchmarks.traffic on a tiny Cua-S1 export: the traffic it writes holds only requests the
model's own preparation accepts, states near the token limit included (Unicode words take more
tokens than the words-to-tokens estimate allows)."""

from __future__ import annotations

import json

import pytest

from benchmarks import traffic
from models.errors import InputTooLong
from models.registry import load


def test_a_state_past_the_limit_is_halved_until_the_model_takes_it(cua_export):
    model = load(cua_export)
    limit = model.limits()["max_prompt_tokens"]
    body = {
        "model": model.name,
        "state": "7: " + " ".join(["日本語 🙂 مرحبا"] * limit),
        "questions": {
            "q0": {"type": "choice", "instructions": "Which team?", "criteria": {"a": "billing", "b": "tech"}}
        },
    }
    with pytest.raises(InputTooLong):
        model.prepare(body)
    kept = traffic.within(model, body)
    model.prepare(kept)  # accepted
    assert kept["state"].startswith("7: 日本語") and len(kept["state"]) < len(body["state"])
    assert len(kept["state"]) > len(body["state"]) // 64  # halved a few times, not emptied


def test_written_traffic_is_all_accepted(cua_export, tmp_path):
    out = tmp_path / "t.jsonl"
    traffic.main(["--export", cua_export, "--n", "64", "--seed", "60", "--out", str(out)])
    model = load(cua_export)
    bodies = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(bodies) == 64
    for b in bodies:
        model.prepare(b)
