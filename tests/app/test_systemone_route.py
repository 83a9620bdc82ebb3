"""The hot route called directly by the request-context layer (routes/systemone.direct), not
through Litestar's router and exception layers: it must answer as they would."""

from __future__ import annotations

import asyncio
import logging

import pytest

from app.config import Settings
from app.main import create_app
from tests.app.test_http import BODY
from tests.app.test_tracing import _with_client


@pytest.fixture
def app(english):
    return create_app(Settings(models=(english[1],)))


def test_an_unexpected_error_is_a_logged_500_problem(app, monkeypatch, caplog):
    engine = app.state.omni.engine
    decide = engine.decide

    async def broken(*args, **kwargs):
        raise RuntimeError("a bug in the engine")

    async def go(client):
        monkeypatch.setattr(engine, "decide", broken)
        bad = await client.post("/v1/systemone", json=BODY, headers={"x-request-id": "bug-1"})
        monkeypatch.setattr(engine, "decide", decide)
        good = await client.post("/v1/systemone", json=BODY)
        metrics = await client.get("/metrics")
        return bad, good, metrics

    with caplog.at_level(logging.ERROR, logger="omni"):
        bad, good, metrics = asyncio.run(_with_client(app, go))
    assert bad.status_code == 500 and bad.headers["content-type"] == "application/problem+json"
    assert bad.json()["code"] == "internal_error" and bad.json()["instance"] == "bug-1"
    assert "a bug" not in bad.text  # logged, not told
    assert bad.headers["x-request-id"] == "bug-1" and "total;dur=" in bad.headers["server-timing"]
    assert any("unhandled error on POST /v1/systemone" in r.getMessage() and r.exc_info for r in caplog.records)
    assert good.status_code == 200
    assert 'omni_errors_total{code="internal_error",status="500"} 1.0' in metrics.text


def test_problems_keep_their_headers_and_profile(app):
    async def go(client):
        wrong = await client.get("/v1/systemone")
        jev = await client.post(
            "/v1/systemone", json={"state": "x", "questions": {}}, headers={"prefer": "profile=jev"}
        )
        return wrong, jev

    wrong, jev = asyncio.run(_with_client(app, go))
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    assert wrong.json()["code"] == "method_not_allowed" and wrong.headers["x-request-id"]
    assert jev.status_code == 422 and jev.headers["content-type"] == "application/json"
    assert jev.json()["detail"][0]["loc"][0] == "body"  # the jev profile's 422 shape
