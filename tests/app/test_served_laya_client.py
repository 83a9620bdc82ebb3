"""Seed 003's served-Laya client (system1-agents' `ServedLayaModel`) against this server.

That client records who answered each decision: the response's `served_by` when there is one,
else `/health`'s entry for the response's `routing.model` in `models` (an object keyed by model
name: `checkpoint`, `revision`, `device`, `weights_dtype`), with `compiled` from the top-level
`compile.enabled` and the device (a CPU model is never compiled), else only `routing.repo`.
`fixtures/served_laya/` holds a request and the responses this server gave it, recorded from a
real server (`python -m tests.app.test_served_laya_client URL` writes them again); the tests
read them the way that client does, and check that a live server still answers in their shape.
"""

from __future__ import annotations

import json
import os
import sys

import httpx

from tests.conftest import run_server

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "served_laya")
# The body the client builds for one decision (laya_question's choice, score and noul questions).
REQUEST = {
    "model": "english",
    "state": "Ticket: I was charged twice for my order. Please refund the duplicate today.",
    "questions": {
        "route": {
            "type": "choice",
            "instructions": "Which team should handle this ticket?",
            "criteria": {"billing": "Charges, refunds and invoices", "technical": "Software problems"},
        },
        "urgency": {
            "type": "score",
            "instructions": "How urgent is the ticket?",
            "criteria": ["Not urgent", "Soon", "Immediately"],
        },
        "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
    },
}


def identity(response: dict, health: dict) -> dict:
    """Who answered, read the way the client reads it."""
    sent = response.get("served_by")
    if isinstance(sent, dict):
        return {**sent, "source": "response"}
    routing = response.get("routing") if isinstance(response.get("routing"), dict) else {}
    models = health.get("models") if isinstance(health.get("models"), dict) else {}
    entry = models.get(routing.get("model")) if routing.get("model") in models else None
    if entry is None and health.get("checkpoint") and health.get("checkpoint") == routing.get("repo"):
        entry = health
    if not isinstance(entry, dict):
        return {"checkpoint": routing.get("repo"), "revision": None, "device": None, "source": "routing"}
    compile_state = health.get("compile") if isinstance(health.get("compile"), dict) else {}
    enabled, device = compile_state.get("enabled"), entry.get("device")
    compiled = (
        enabled and not device.startswith("cpu") if isinstance(enabled, bool) and isinstance(device, str) else None
    )
    return {
        "checkpoint": entry.get("checkpoint") or routing.get("repo"),
        "revision": entry.get("revision"),
        "device": device,
        "weights_dtype": entry.get("weights_dtype"),
        "compiled": compiled,
        "source": "health",
    }


def label(who: dict, fallback: str) -> str:
    """The client's `Decision.model`: checkpoint@revision (12 characters), else what it has."""
    if who.get("checkpoint") and who.get("revision"):
        return "%s@%s" % (who["checkpoint"], str(who["revision"])[:12])
    return str(who.get("checkpoint") or fallback)


def fixture(name: str) -> dict:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return json.load(f)


def shape(value):
    """Keys all the way down (the first item standing for a list); values left out."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return None


def client_view(name: str, body: dict):
    """What the client reads of a recorded body, as keys."""
    if name == "request.json":
        return shape(body)
    if name == "health.json":
        return {
            "status": body["status"],
            "compile": shape(body["compile"]),
            "models": {n: shape({k: e[k] for k in IDENTITY if k in e}) for n, e in body["models"].items()},
        }
    return {
        "keys": sorted(body),
        "answers": list(body["answers"]),
        "usage": shape(body["usage"]),
        **{k: shape(body[k]) for k in ("served_by", "routing", "x_served_by", "x_routing") if k in body},
    }


IDENTITY = ("checkpoint", "revision", "device", "weights_dtype", "compiled")


def test_the_recorded_health_is_keyed_by_model_name():
    health = fixture("health.json")
    assert health["status"] == "ready" and isinstance(health["compile"]["enabled"], bool)
    entry = health["models"]["english"]
    assert entry["name"] == "english"
    assert all(isinstance(entry[k], str) for k in ("checkpoint", "device", "weights_dtype"))
    assert "revision" in entry  # null for a local checkpoint, the Hub commit for a published one


def test_served_by_and_health_give_the_client_the_same_identity():
    """A response with `served_by`, and the same response without it (read through /health),
    name the same checkpoint, revision, device, dtype and compilation."""
    health, response = fixture("health.json"), fixture("response_reference.json")
    sent = identity(response, health)
    assert sent["source"] == "response" and sent["compiled"] is False  # a CPU model
    read = identity({k: v for k, v in response.items() if k != "served_by"}, health)
    assert read["source"] == "health"
    assert {k: read[k] for k in IDENTITY} == {k: sent[k] for k in IDENTITY}
    assert label(read, "english") == label(sent, "english") != "english"


def test_a_jev_profile_response_leaves_the_client_the_model_it_asked_for():
    """The `jev` profile prefixes `served_by` and `routing` with `x_`; this client reads neither,
    so it cannot key /health and records the model name it sent (docs/api.md)."""
    health, response = fixture("health.json"), fixture("response_jev.json")
    assert "served_by" not in response and "routing" not in response
    assert response["x_served_by"]["checkpoint"] == health["models"]["english"]["checkpoint"]
    who = identity(response, health)
    assert who["source"] == "routing" and label(who, "english") == "english"


def record(url: str, directory: str = FIXTURES) -> dict:
    """The fixtures, from the server at `url` (written to `directory` when it is given)."""
    out = {"request.json": REQUEST, "health.json": httpx.get(url + "/health", timeout=10).json()}
    for profile in ("reference", "jev"):
        r = httpx.post(url + "/v1/systemone", json=REQUEST, headers={"prefer": "profile=" + profile}, timeout=30)
        assert r.status_code == 200, r.text
        out["response_%s.json" % profile] = r.json()
    if directory:
        os.makedirs(directory, exist_ok=True)
        for name, body in out.items():
            with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
                json.dump(body, f, indent=1, ensure_ascii=False)
                f.write("\n")
    return out


def test_a_live_server_answers_in_the_recorded_shape(english, tmp_path):
    with run_server(tmp_path, {"OMNI_MODELS": english[1]}) as server:
        live = record(server.url, directory="")
    for name, body in live.items():
        assert client_view(name, body) == client_view(name, fixture(name)), name
    health, response = live["health.json"], live["response_reference.json"]
    served = response["served_by"]
    assert served["compiled"] is False and health["compile"] == {"enabled": False}
    read = identity({k: v for k, v in response.items() if k != "served_by"}, health)
    assert {k: read[k] for k in IDENTITY} == {k: served[k] for k in IDENTITY}


if __name__ == "__main__":
    record(sys.argv[1].rstrip("/"))
