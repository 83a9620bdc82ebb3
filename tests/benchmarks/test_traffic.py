"""benchmarks.traffic: seeded traffic from an export's own limits, every request of it answered
by a real server."""

from __future__ import annotations

import json

import httpx

from benchmarks import traffic


def test_traffic_from_an_exports_limits_is_answered_whole(english, server, tmp_path):
    out = tmp_path / "t.jsonl"
    traffic.main(["--export", english[1], "--n", "48", "--seed", "60", "--out", str(out)])
    bodies = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(bodies) == 48
    again = tmp_path / "again.jsonl"
    traffic.main(["--export", english[1], "--n", "48", "--seed", "60", "--out", str(again)])
    assert again.read_text(encoding="utf-8") == out.read_text(encoding="utf-8")  # seeded
    kinds = [q["type"] for b in bodies for q in b["questions"].values()]
    assert set(kinds) == {"choice", "score", "noul"} and {len(b["questions"]) for b in bodies} == {1, 2, 3}
    words = sorted(len(b["state"].split(" ")) for b in bodies)
    assert words[0] < 10 and words[-1] > 40  # short and long states
    with httpx.Client(timeout=60) as client:
        replies = [client.post(server.url + "/v1/systemone", json=b) for b in bodies]
    assert [r.status_code for r in replies] == [200] * 48
    assert sum(len(r.json()["answers"]) for r in replies) == len(kinds)


def test_states_stay_under_the_models_token_limit():
    limits = {"question_types": ["choice"], "max_choice_options": 8, "max_prompt_tokens": 4096}
    bodies = traffic.traffic("m", limits, 400, seed=1)
    longest = max(len(b["state"].split(" ")) for b in bodies)
    assert longest <= (4096 - 256) // traffic.TOKENS_A_WORD
    assert all(2 <= len(q["criteria"]) <= 8 for b in bodies for q in b["questions"].values())
