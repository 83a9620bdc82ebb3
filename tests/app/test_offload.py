"""Large requests are prepared on a worker thread, small ones on the event loop (together with
the others of their loop turn, app/runtime/preparing.py)."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading

from app.config import Settings
from app.main import create_app
from tests.app.test_http import BODY
from tests.app.test_tracing import _with_client


def test_large_bodies_prepare_off_the_event_loop(english):
    app = create_app(Settings(models=(english[1],)))
    model = app.app.state.omni.registry.slots[0].model
    seen: list[tuple[int, bool]] = []
    original, original_many = model.prepare, model.prepare_many

    def note(body):
        seen.append((len(str(body.get("state", ""))), threading.current_thread() is threading.main_thread()))

    def recording(body, profile="reference"):
        note(body)
        return original(body, profile)

    def recording_many(bodies, profiles=None):
        for body in bodies:
            note(body)
        return original_many(bodies, profiles)

    model.prepare, model.prepare_many = recording, recording_many
    big = dict(BODY, state="I was charged twice for my order. " * 3000)  # ~100 KB body

    # The same large body as 1 KB of gzip: its size once decompressed decides, not as sent.
    zipped = dict(BODY, state="I was refunded once, never twice. " * 3000)

    async def go(client):
        sent = [await client.post("/v1/systemone", json=b) for b in (BODY, big)]
        return sent + [
            await client.post(
                "/v1/systemone",
                content=gzip.compress(json.dumps(zipped).encode()),
                headers={"content-type": "application/json", "content-encoding": "gzip"},
            )
        ]

    small_r, big_r, zipped_r = asyncio.run(_with_client(app, go))
    assert small_r.status_code == 200 and big_r.status_code == 200 and zipped_r.status_code == 200
    requests = [s for s in seen if s[0] in (len(BODY["state"]), len(big["state"]))][-3:]
    assert requests == [(len(BODY["state"]), True), (len(big["state"]), False), (len(zipped["state"]), False)]
    assert big_r.json()["usage"]["truncated"] is True
