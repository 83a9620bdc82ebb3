"""app.main's app as served, with one fault injected for the tests: a decision request for the
model `fault` fails with an unexpected error inside the engine, as a bug would (tests serve it
with `run_server(..., target="tests.app.faulty_app:app")`)."""
from __future__ import annotations

import logging

from app.main import app

FAULT_MODEL = "fault"
_engine = app.state.omni.engine
_decide = _engine.decide


async def _decide_or_fail(body, *args, **kwargs):
    if isinstance(body, dict) and body.get("model") == FAULT_MODEL:
        logging.getLogger("omni.serving").warning("about to fail on purpose")
        raise RuntimeError("injected fault")
    return await _decide(body, *args, **kwargs)


_engine.decide = _decide_or_fail
