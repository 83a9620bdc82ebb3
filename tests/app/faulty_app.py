"""app.main's app as served, with faults injected for the tests: a decision request for the model
`fault` or `fault-2` fails with an unexpected error inside the engine, as a bug would (tests
serve it with `run_server(..., target="tests.app.faulty_app:app")`). The two fail at different
places, so each has its traceback logged the first time it is hit (app/routes/common.Repeats).
`fault-quoting` fails at a third, with an exception whose message quotes the request's state.

Faults inside the executor, for the failure-domain tests: a request to a served model whose
state begins with one of these is prepared as usual, then in its forward pass
- `omni-fault:finish` makes the adapter's unpack (where Laya calibrates) raise for any pass
  that holds it, as a bug in finishing would;
- `omni-fault:block` holds its pass for FAULTY_APP_BLOCK_S seconds (default 3), as a device that
  stopped answering would;
- `omni-fault:hold` holds its pass (logging "holding a pass") until HOLD_FOR requests wait in
  the queue behind it, at most HOLD_S seconds, so that those requests share the passes after it;
- `omni-fault:break` breaks its model's session: that pass and every later one raise, until the
  server rebuilds the session."""

from __future__ import annotations

import logging
import os
import time

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
    if model == "fault-quoting":  # a bug whose exception quotes the client's text
        _fail_quoting(str(body.get("state"))[:200])
    return await _decide(body, *args, **kwargs)


_engine.decide = _decide_or_fail


MARK = "omni-fault:"
HOLD_FOR, HOLD_S = 16, 30.0


class _Marked(list):
    """A prepared work (a list of rows, as every family's is) that carries its fault."""

    fault = ""


def _mark(body, prepared):
    state = body.get("state") if isinstance(body, dict) else None
    if isinstance(state, str) and state.startswith(MARK) and not isinstance(prepared, BaseException):
        prepared.work = _Marked(prepared.work)
        prepared.work.fault = state[len(MARK) :].split()[0]
    return prepared


class _Broken:
    def __init__(self, session):
        self.session = session

    def run(self, *args, **kwargs):
        raise RuntimeError("CUDA failure 700: an illegal memory access was encountered (injected)")

    def __getattr__(self, name):
        return getattr(self.session, name)


def _inject(slot) -> None:
    model, adapter = slot.model, slot.model.adapter
    prepare, prepare_many, unpack = model.prepare, model.prepare_many, adapter.unpack

    def marked_prepare(body, profile="reference"):
        return _mark(body, prepare(body, profile))

    def marked_prepare_many(bodies, profiles=None):
        return [_mark(b, p) for b, p in zip(bodies, prepare_many(bodies, profiles))]

    def faulty_unpack(outputs, works, packed, **kwargs):
        faults = {getattr(w, "fault", "") for w in works}
        if "block" in faults:
            time.sleep(float(os.environ.get("FAULTY_APP_BLOCK_S", "3")))
        if "hold" in faults:
            logging.getLogger("omni.serving").warning("holding a pass until %d requests wait", HOLD_FOR)
            end = time.monotonic() + HOLD_S
            while _engine.executor.depth() < HOLD_FOR and time.monotonic() < end:
                time.sleep(0.005)
        if "finish" in faults:
            raise RuntimeError("injected fault in finishing")
        if "break" in faults:
            slot.session = _Broken(slot.session)
            raise RuntimeError("injected fault: the session broke")
        return unpack(outputs, works, packed, **kwargs)

    model.prepare, model.prepare_many, adapter.unpack = marked_prepare, marked_prepare_many, faulty_unpack


for _slot in _engine.registry.slots:
    _inject(_slot)
