"""Property-based fuzzing of the Qwen3.5 families' preparation with real tokenizers: any JSON
request either prepares or is refused with a client error of a known code, never anything else
(which the server would answer with a 5xx)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from models.errors import RequestError
from models.nesting import nests_deeper
from tests.app.test_fuzz import KNOWN, deep_requests, requests_, speaks_python, valid_ish, values

pytestmark = pytest.mark.slow  # hundreds of generated requests a family

FUZZ = settings(max_examples=700, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
KNOWN_HERE = KNOWN | {"too_large"}


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from models.qwen35 import tokenizer_build
    from models.tokenizer import TokenizerHandle

    directory = str(tmp_path_factory.mktemp("fuzz-tok"))
    tokenizer_build.save(directory)
    return TokenizerHandle.load(directory)


def _prepare_or_refuse(fn, body) -> None:
    if nests_deeper(body):
        return  # the body path refuses it before any model (tests/app/test_fuzz.py)
    try:
        fn(body)
    except RequestError as exc:
        assert exc.code in KNOWN_HERE and 400 <= exc.status < 500, (exc.status, exc.code)
        assert not speaks_python(exc.detail), exc.detail


def _named(body, name):
    return (
        dict(body, model=name)
        if isinstance(body, dict) and "model" in body and body["model"] in ("english", "laya", "EN")
        else body
    )


# The body decoder refuses anything but a JSON object before preparation (tests/app/test_fuzz.py),
# and a body of more JSON values than OMNI_MAX_BODY_VALUES; below that bound, many tiny
# containers in the state or a question still reach preparation, and so do deeply nested ones
# within the body path's nesting bound.
tiny = st.sampled_from([[], {}, [[]], [{}], 0, ""])


def _amplified(body: dict, unit, n: int, place: str) -> dict:
    many = [unit] * n
    if place == "state" or not body.get("questions") or not isinstance(body["questions"], dict):
        return dict(body, state=many)
    qid, qdef = next(iter(body["questions"].items()))
    if not isinstance(qdef, dict):
        return dict(body, state=many)
    return dict(body, questions={**body["questions"], qid: {**qdef, place: many}})


amplified = st.builds(
    _amplified, valid_ish, tiny, st.integers(500, 20_000), st.sampled_from(["state", "instructions", "criteria"])
)
bodies = st.one_of(
    requests_, valid_ish, st.dictionaries(st.text(max_size=10), values, max_size=5), amplified, deep_requests
)


@FUZZ
@given(body=bodies)
def test_cua_s1(tok, body):
    from models.cua_s1.prepare import prepare

    _prepare_or_refuse(lambda b: prepare(b, tok), _named(body, "cua-s1-4b-0.2"))


@FUZZ
@given(body=bodies)
def test_open_jev(tok, body):
    from models.open_jev.checkpoint import CHAT_PREFIX, CHAT_SUFFIX, VARIANTS, MergedExport
    from models.open_jev.prepare import prepare

    v = VARIANTS["9b"]
    export = MergedExport(
        v.model_id,
        v.base_revision,
        v.revision,
        v.temperature,
        4096,
        CHAT_PREFIX,
        CHAT_SUFFIX,
        np.zeros(64, dtype=np.float32),
        0.0,
    )
    _prepare_or_refuse(lambda b: prepare(b, tok, export), _named(body, "open-jev-9b"))


@FUZZ
@given(body=bodies)
def test_clef_flash(tok, body):
    from models.clef_flash.prepare import prepare_record

    _prepare_or_refuse(lambda b: prepare_record(b, tok), _named(body, "clef-flash"))
