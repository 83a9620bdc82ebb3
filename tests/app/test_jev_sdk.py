"""The official Jev Python SDK (typesafe-sdk) against our server in the `jev` profile."""

from __future__ import annotations

import pytest

from tests.conftest import run_server


@pytest.fixture(scope="module")
def jev_server(english, tmp_path_factory):
    env = {"OMNI_MODELS": english[1], "OMNI_PROFILE": "jev", "OMNI_API_KEY": "sdk-test-key"}
    with run_server(tmp_path_factory.mktemp("jev"), env) as s:
        yield s


def _client(server, **kw):
    from typesafe_sdk import RetryPolicy, TypeSafeClient

    return TypeSafeClient(api_key="sdk-test-key", base_url=server.url, retry=RetryPolicy(max_retries=0), **kw)


def test_sdk_parses_every_answer_type(jev_server):
    from typesafe_sdk import Choice, Noul, Score

    questions = {
        "department": Choice(
            instructions="Which team should handle this?",
            criteria={"billing": "Charges and refunds", "technical": None},
        ),
        "urgency": Score(instructions="How urgent?", criteria=["Not urgent", "Soon", "Immediately"]),
        "refund": Noul(instructions="Does the customer ask for a refund?"),
        "spam": Noul(instructions="Is it spam?", criteria={"true": "Unsolicited advertising"}),
    }
    # A state over 1 KiB: the SDK zstd-compresses it (Content-Encoding: zstd).
    state = {"ticket": "I was charged twice for my order. Please refund the duplicate today. " * 20}
    with _client(jev_server) as client:
        response = client.system_one(state=state, questions=questions, model="jev-latest")
    assert response.model == "english"
    assert set(response.choices) == {"department"} and set(response.scores) == {"urgency"}
    assert set(response.nouls) == {"refund", "spam"}
    choice = response.choices["department"]
    assert choice.choice in ("billing", "technical")
    assert abs(sum(choice.probabilities.values()) - 1) < 1e-3
    assert 0.0 <= choice.confidence <= 1.0
    score = response.scores["urgency"]
    assert 0.0 <= score.score <= 2.0 and len(score.probabilities) == 3
    assert 0.0 <= response.nouls["refund"].noul <= 1.0
    assert response.usage.input_tokens > 0 and response.usage.output_tokens == 0


def test_sdk_small_uncompressed_request_and_models(jev_server):
    from typesafe_sdk import Noul

    with _client(jev_server, compression=False) as client:
        response = client.system_one(state="short", questions={"q": Noul(instructions="ok?")})
        assert 0.0 <= response.nouls["q"].noul <= 1.0
        listed = client.models.list()
    assert [m.name for m in listed.models] == ["english"]


def test_sdk_maps_errors(jev_server):
    from typesafe_sdk import Noul, TypeSafeAuthenticationError, TypeSafeClient, TypeSafeUnprocessableEntityError
    from typesafe_sdk import RetryPolicy

    with _client(jev_server) as client, pytest.raises(TypeSafeUnprocessableEntityError):
        client.system_one(state="x", questions={"q": Noul(instructions="ok?")}, model="nonexistent")
    with (
        TypeSafeClient(api_key="wrong-key", base_url=jev_server.url, retry=RetryPolicy(max_retries=0)) as client,
        pytest.raises(TypeSafeAuthenticationError),
    ):
        client.system_one(state="x", questions={"q": Noul(instructions="ok?")})
