"""app.main's app as served, with faults injected for the tests: a decision request for the model
`fault` or `fault-2` fails with an unexpected error inside the engine, as a bug would (tests
serve it with `run_server(..., target="tests.app.faulty_app:app")`). The two fail at different
places, so each has its traceback logged the first time it is hit (app/routes/common.Repeats).
`fault-quoting` fails at a third, with an exception whose message quotes the request's state."""
from __future__ import annotations

import logging

from app.main import app

_engine = app.state.omni.engine
_decide = _engine.decide


def _fail() -> None:
    raise RuntimeError("injected fault")


def _fail_elsewhere() -> None:
    raise RuntimeError("injected fault")


def _fail_quoting(state: str) -> None:
    raise RuntimeError("injected fault over %r:\n%s" % (state[:20], state))


FAULTS = {"fault": _fail, "fault-2": _fail_elsewhere}


async def _decide_or_fail(body, *args, **kwargs):
    model = body.get("model") if isinstance(body, dict) else None
    fault = FAULTS.get(model)
    if fault is not None:
        logging.getLogger("omni.serving").warning("about to fail on purpose: %s", str(body.get("state"))[:200])
        fault()
    if model == "fault-quoting":        # a bug whose exception quotes the client's text
        _fail_quoting(str(body.get("state"))[:200])
    return await _decide(body, *args, **kwargs)


_engine.decide = _decide_or_fail
