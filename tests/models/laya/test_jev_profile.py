"""What Laya takes in the `jev` profile beyond what laya itself takes: a choice one row cannot
hold, spread over rows of the same question whose option logits go through one softmax, and a
noul question without `instructions`. The `reference` profile keeps laya's refusals."""

from __future__ import annotations

import numpy as np
import pytest

from models.errors import RequestError
from models.laya.checkpoint import QTYPES, temp_bucket

STATE = "I was charged twice for my March invoice and the refund has not arrived."


def queues(n: int) -> dict:
    return {
        "Billing": "Payments, invoices, refunds",
        **{"Queue %03d" % i: "Tickets routed to queue %d" % i for i in range(1, n)},
    }


def choice(n: int, **extra) -> dict:
    return {"type": "choice", "instructions": "Which queue should this ticket go to?", "criteria": queues(n), **extra}


def test_reference_profile_refuses_a_choice_one_row_cannot_hold(pipeline_english):
    with pytest.raises(RequestError) as info:
        pipeline_english.model.prepare({"state": STATE, "questions": {"queue": choice(128)}})
    assert (info.value.status, info.value.code) == (422, "invalid_question")
    assert "option markers fit" in info.value.errors[0]["detail"]


@pytest.mark.parametrize("n", [128, 255])
def test_jev_profile_spreads_the_options_over_rows_and_answers_them_in_one_softmax(pipeline_english, n):
    model = pipeline_english.model
    order = list(range(n))[::-1]  # option_order too: the rows hold the options in this order
    body = {
        "state": STATE,
        "questions": {"queue": choice(n, option_order=order), "refund": {"type": "noul", "instructions": "Refund?"}},
    }
    prepared = model.prepare(body, "jev")
    rows = prepared.work
    spread = rows[0].span
    assert spread > 1 and [r.span for r in rows] == [spread] + [0] * (spread - 1) + [1]
    assert sum(len(r.markers) for r in rows[:spread]) == n and prepared.rows == spread + 1

    # By hand: the rows' raw option logits side by side, one softmax at the temperature of n
    # options, then back to request order.
    packed = model.adapter.pack([rows])
    logits = pipeline_english.session.run(None, packed.feeds)[0].astype(np.float32)
    raw = np.concatenate([logits[j, : len(rows[j].markers)] for j in range(spread)])
    cal = model.calibration
    qtype = QTYPES["choice"]
    t = np.float32(cal["temperature_by_options"].get(temp_bucket(qtype, n), cal["temperature"][qtype]))
    z = raw / t
    p = np.exp(z - z.max())
    p /= p.sum()
    expected = np.empty_like(p)
    expected[np.asarray(order)] = p

    (output,) = model.adapter.unpack(pipeline_english.session.run(None, packed.feeds), [rows], packed)
    assert output[0].shape[0] == 2  # one row of logits per question
    np.testing.assert_allclose(output[2][0].probs, expected, atol=1e-6)

    answer = model.finish(prepared, output, "jev", model.name)["answers"]["queue"]
    keys = list(queues(n))
    assert list(answer["probabilities"]) == keys
    assert answer["choice"] == keys[int(np.argmax(expected))]
    assert abs(sum(answer["probabilities"].values()) - 1) <= n * 0.5e-4  # each rounded to 4 places
    assert answer["x_option_rows"] == spread


def test_a_spread_question_answers_alike_alone_and_batched(pipeline_english):
    spread = {
        "state": STATE,
        "questions": {
            "a": {"type": "noul", "instructions": "Refund?"},
            "queue": choice(128),
            "z": {"type": "score", "instructions": "How urgent?", "criteria": ["Not urgent", "Soon", "Now"]},
        },
    }
    other = {
        "state": "Short.",
        "questions": {
            "team": {"type": "choice", "instructions": "Team?", "criteria": {"billing": None, "technical": None}}
        },
    }
    alone = pipeline_english.outputs([spread], "jev")[1][0][2]
    batched = pipeline_english.outputs([other, spread, other], "jev")[1][1][2]
    assert len(alone) == len(batched) == 3
    for a, b in zip(alone, batched):
        np.testing.assert_allclose(a.probs, b.probs, atol=1e-6)
        assert a.top == b.top


def test_jev_profile_takes_a_noul_without_instructions_its_criteria_as_text(pipeline_english):
    criteria = {"true": "The customer threatens a chargeback", "false": "No threat"}
    bare = {"state": STATE, "questions": {"threat": {"type": "noul", "criteria": criteria}}}
    worded = {"state": STATE, "questions": {"threat": {"type": "noul", "instructions": criteria, "criteria": criteria}}}
    assert pipeline_english(bare, "jev")["answers"] == pipeline_english(worded, "jev")["answers"]
    with pytest.raises(RequestError) as info:
        pipeline_english.model.prepare(bare)
    assert info.value.code == "invalid_question"
    for bad in ({"type": "noul"}, {"type": "noul", "criteria": {}}, {"type": "choice", "criteria": {"a": None}}):
        with pytest.raises(RequestError):
            pipeline_english.model.prepare({"state": STATE, "questions": {"q": bad}}, "jev")
