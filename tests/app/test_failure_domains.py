"""Failure domains against a real server (tests/app/faulty_app.py injects the faults inside the
executor): a request whose finishing raises fails alone inside a batch; a broken session takes
its model out of service until the server rebuilds it; a hung pass fails /livez; one model out
of service leaves the other serving."""

from __future__ import annotations

import concurrent.futures
import time

import httpx
import pytest

from tests.app.test_http import BODY
from tests.conftest import run_server

FAULTY = "tests.app.faulty_app:app"
QUESTIONS = {
    "team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "Money", "tech": "Software"}},
    "urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["low", "mid", "high"]},
    "refund": {"type": "noul", "instructions": "Refund asked?"},
}


def _body(i: int, state: str | None = None) -> dict:
    return {
        "model": "english",
        "state": state or "ticket %d: I was charged twice, please refund" % i,
        "questions": {qid: q for n, (qid, q) in enumerate(QUESTIONS.items()) if n <= i % 3},
    }


def _post(url: str, body: dict, rid: str) -> httpx.Response:
    return httpx.post(url + "/v1/systemone", json=body, headers={"x-request-id": rid}, timeout=30)


def _until(check, timeout: float = 30.0, step: float = 0.05):
    end = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < end, "timed out"
        time.sleep(step)
    return value


@pytest.fixture(scope="module")
def served(english, tmp_path_factory):
    env = {
        "OMNI_MODELS": english[1],
        "OMNI_PASS_TIMEOUT_S": "1",
        "FAULTY_APP_BLOCK_S": "4",
    }
    with run_server(tmp_path_factory.mktemp("domains"), env, target=FAULTY) as s:
        yield s


def test_a_request_whose_finishing_raises_fails_alone_in_a_batch_of_16(served):
    alone = [_post(served.url, _body(i), "alone-%d" % i).json()["answers"] for i in range(16)]
    bodies = [_body(i) for i in range(16)]
    bodies[5] = _body(5, "omni-fault:finish and a ticket")
    with concurrent.futures.ThreadPoolExecutor(17) as pool:
        # A pass held until the 16 wait behind it, so that they share the passes after it.
        lead = pool.submit(_post, served.url, _body(0, "omni-fault:hold lead"), "lead")
        _until(lambda: "holding a pass" in served.log(), step=0.01)
        replies = list(pool.map(lambda i: _post(served.url, bodies[i], "batch-%d" % i), range(16)))
        assert lead.result().status_code == 200
    bad = replies[5]
    assert bad.status_code == 500 and bad.json()["code"] == "inference_failed"
    assert bad.json()["instance"] == "batch-5" == bad.headers["x-request-id"]
    for i, reply in enumerate(replies):
        if i == 5:
            continue
        assert reply.status_code == 200, (i, reply.text)
        for qid, answer in reply.json()["answers"].items():
            for key, p in answer.get("probabilities", {}).items():
                assert abs(p - alone[i][qid]["probabilities"][key]) <= 1e-4
    assert httpx.get(served.url + "/readyz").status_code == 200
    assert httpx.get(served.url + "/livez").status_code == 200
    log = served.log()
    assert "running them again in halves" in log  # it did share a pass with others
    assert "request batch-5 failed alone, and the model's own warm-up request passes" in log


def test_a_broken_session_is_out_of_service_then_rebuilt(served):
    broke = _post(served.url, _body(0, "omni-fault:break now"), "breaker")
    assert broke.status_code == 503 and broke.json()["code"] == "not_ready" and broke.headers["retry-after"]
    ready = httpx.get(served.url + "/readyz")
    assert ready.status_code == 503 and ready.json()["models"][0]["state"] in ("failed", "loading", "warming")
    assert httpx.get(served.url + "/livez").status_code == 200  # the server mends it itself
    _until(lambda: httpx.get(served.url + "/readyz").status_code == 200)
    assert _post(served.url, _body(1), "after").status_code == 200
    metrics = httpx.get(served.url + "/metrics").text
    assert 'omni_model_recoveries_total{model="english"}' in metrics
    assert "model english is back in service after 1 rebuild(s)" in served.log()


def test_a_blocked_pass_turns_livez_to_503_until_it_ends(served):
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        blocked = pool.submit(_post, served.url, _body(0, "omni-fault:block for a while"), "the-blocked-one")
        live = _until(lambda: (r := httpx.get(served.url + "/livez")).status_code == 503 and r)
        assert live.json()["code"] == "not_live"
        assert "forward pass for model english" in live.json()["detail"]
        assert "the-blocked-one" in live.json()["detail"]
        assert blocked.result().status_code == 200  # it ends, and is answered
    assert httpx.get(served.url + "/livez").status_code == 200
    log = served.log()
    assert "the executor looks hung" in log and "the-blocked-one" in log


def test_one_model_out_of_service_leaves_the_other_serving(english, multilingual, tmp_path):
    env = {"OMNI_MODELS": "%s,%s" % (english[1], multilingual[1])}
    with run_server(tmp_path, env, target=FAULTY) as s:
        broke = _post(s.url, _body(0, "omni-fault:break now"), "breaker")
        assert broke.status_code == 503
        other = {**BODY, "model": "multilingual"}
        for i in range(5):
            assert _post(s.url, other, "other-%d" % i).status_code == 200
        _until(lambda: httpx.get(s.url + "/readyz").status_code == 200)
