"""Property-based fuzzing of the body decoder and the validator: over 10,000 generated requests,
no error other than a problem with a known code, and every request that passes preparation runs
through the model and is finished without error. Amplified shapes (a few bytes of gzip or zstd
that expand to many tiny containers, anywhere in the request) are refused by their count of JSON
values before they are decoded. Over HTTP: generated requests, and request lines and headers
holding raw bytes, never answered with a 5xx."""

from __future__ import annotations

import gzip
import json
import re
import socket

import httpx
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings, strategies as st

from app.body import check_headers, count_values, decode
from app.config import Settings
from app.problems import Problem
from models.errors import InferenceFailed, RequestError
from models.nesting import MAX_NESTING
from tests.app.test_edges import PLACES, nested

pytestmark = pytest.mark.slow  # thousands of generated requests: minutes

KNOWN = {
    "malformed_request",
    "unsupported_media_type",
    "too_large",
    "length_required",
    "invalid_request",
    "invalid_question",
    "unknown_model",
    "too_many_questions",
    "input_too_long",
}
# What a problem's detail never says: it speaks of JSON, not of the Python that parsed it. What the
# client sent, quoted back, is left out of the search.
PYTHON_WORDS = re.compile(
    r"sys\.|utf-8-sig|NoneType|Traceback|[Rr]ecursion|object of type|__\w+__|"
    r"\b(dict|str|tuple|bytes|bool|int|float)\b"
)
QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


def speaks_python(detail: str) -> bool:
    return PYTHON_WORDS.search(QUOTED.sub("", detail)) is not None


CFG = Settings(max_body_bytes=1 << 20, max_decompressed_bytes=1 << 20, max_body_values=4096)
FUZZ = settings(max_examples=2600, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["", " ", "[MASK]", "<mask>", "\u0000", "choice", "true", "false"]),
)
values = st.recursive(
    scalars,
    lambda c: st.one_of(st.lists(c, max_size=5), st.dictionaries(st.text(max_size=8), c, max_size=5)),
    max_leaves=20,
)
criteria = st.one_of(
    values,
    st.lists(st.one_of(st.text(max_size=12), st.integers(), st.booleans(), st.none()), max_size=12),
    st.dictionaries(st.text(max_size=12), st.one_of(st.none(), st.text(max_size=30), values), max_size=12),
)
question = st.fixed_dictionaries(
    {"type": st.one_of(st.sampled_from(["choice", "score", "noul"]), values)},
    optional={
        "instructions": values,
        "criteria": criteria,
        "labels": st.one_of(values, st.fixed_dictionaries({"false": st.text(max_size=5), "true": st.text(max_size=5)})),
        "option_order": st.one_of(values, st.lists(st.integers(-1, 12), max_size=12)),
    },
)
texts = st.text(min_size=1, max_size=30)
labels = st.one_of(texts, st.integers(-5, 5), st.floats(allow_nan=False, allow_infinity=False), st.booleans())
valid_question = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("choice"),
            "instructions": st.one_of(texts, values),
            "criteria": st.one_of(
                st.dictionaries(texts, st.one_of(st.none(), texts, values), min_size=1, max_size=12),
                st.lists(labels, min_size=1, max_size=12),
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("score"),
            "instructions": st.one_of(texts, values),
            "criteria": st.lists(st.one_of(texts, values), min_size=1, max_size=10),
        }
    ),
    st.fixed_dictionaries(
        {"type": st.just("noul"), "instructions": st.one_of(texts, values)},
        optional={
            "criteria": st.dictionaries(
                st.sampled_from(["true", "false", "TRUE", "False"]), st.one_of(st.none(), texts, values), max_size=2
            ),
            "labels": st.fixed_dictionaries({"false": texts, "true": texts}),
        },
    ),
)
valid_ish = st.fixed_dictionaries(
    {
        "state": st.one_of(
            st.text(max_size=400), st.dictionaries(texts, values, max_size=6), st.lists(values, max_size=6)
        ),
        "questions": st.dictionaries(texts, valid_question, min_size=1, max_size=6),
    },
    optional={"model": st.sampled_from(["english", "laya", "jev-latest", "EN"])},
)


def nest(depth: int, leaf, kinds: str):
    """`leaf` inside `depth` arrays and objects, `kinds` ("a" array, "o" object) cycling."""
    value = leaf
    for i in range(depth):
        value = [value] if kinds[i % len(kinds)] == "a" else {"k%d" % i: value}
    return value


# Values nested around the body path's bound (models/nesting.py): those within it reach the model.
deep_values = st.builds(
    nest,
    st.integers(1, 2 * MAX_NESTING),
    st.one_of(texts, st.none(), st.integers()),
    st.sampled_from(["a", "o", "ao", "aoo"]),
)
deep_question = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("choice"),
            "instructions": st.one_of(texts, deep_values),
            "criteria": st.one_of(
                st.fixed_dictionaries({"a": deep_values, "b": st.none()}), st.lists(deep_values, min_size=1, max_size=3)
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("score"),
            "instructions": texts,
            "criteria": st.lists(st.one_of(texts, deep_values), min_size=1, max_size=4),
        }
    ),
    st.fixed_dictionaries(
        {"type": st.just("noul"), "instructions": st.one_of(texts, deep_values)},
        optional={"criteria": st.fixed_dictionaries({"true": deep_values}, optional={"false": texts})},
    ),
)
deep_requests = st.fixed_dictionaries(
    {"state": st.one_of(texts, deep_values), "questions": st.dictionaries(texts, deep_question, min_size=1, max_size=3)}
)
requests_ = st.fixed_dictionaries(
    {},
    optional={
        "model": st.one_of(st.sampled_from(["english", "laya", "jev-latest", "nope"]), values),
        "state": values,
        "questions": st.one_of(values, st.dictionaries(st.text(max_size=10), question, max_size=6)),
    },
)


class Offline:
    """The handler's path without HTTP: headers, decompress, parse, resolve, prepare, run, finish."""

    def __init__(self, pipeline):
        from app.runtime.registry import Registry

        self.pipeline = pipeline
        self.registry = Registry([pipeline.model])
        self.ran = 0

    def __call__(self, raw: bytes, headers: dict | None = None):
        h = {"content-type": "application/json", "content-length": str(len(raw)), **(headers or {})}
        try:
            encoding = check_headers(h, CFG)
            body, _ = decode(raw, encoding, CFG)
            slot = self.registry.resolve(body.get("model"))
            prepared = slot.model.prepare(body)
        except (Problem, RequestError) as exc:
            assert exc.code in KNOWN and 400 <= exc.status < 500, (exc.status, exc.code)
            assert not speaks_python(exc.detail), exc.detail
            for error in exc.errors:
                assert not speaks_python(error["detail"]), error
            return exc.status
        if self.ran < 400:  # the forward pass is the slow part: a sample runs it
            self.ran += 1
            packed = slot.model.adapter.pack([prepared.work])
            out = slot.model.adapter.unpack(self.pipeline.session.run(None, packed.feeds), [prepared.work], packed)
            try:
                result = slot.model.finish(prepared, out[0], "reference", slot.name)
            except InferenceFailed:  # only if the model itself produced non-finite numbers
                raise
            assert list(result["answers"]) == list(body["questions"])
            json.dumps(result)
        return 200


@pytest.fixture(scope="module")
def offline(pipeline_english):
    return Offline(pipeline_english)


@FUZZ
@given(body=st.one_of(requests_, valid_ish, valid_ish), ascii_only=st.booleans())
def test_structured_requests(offline, body, ascii_only):
    offline(json.dumps(body, ensure_ascii=ascii_only, allow_nan=True).encode())


@FUZZ
@given(body=values)
def test_any_json_document(offline, body):
    offline(json.dumps(body, allow_nan=True).encode())


VALID = json.dumps(
    {
        "state": "I was charged twice.",
        "questions": {"q": {"type": "choice", "instructions": "Which?", "criteria": {"a": None, "b": "bee"}}},
    }
).encode()


@FUZZ
@given(
    data=st.one_of(
        st.binary(max_size=300),
        st.tuples(st.integers(0, len(VALID)), st.integers(0, len(VALID)), st.binary(max_size=8)).map(
            lambda t: VALID[: t[0]] + t[2] + VALID[t[1] :]
        ),
        st.sampled_from(
            [
                b"\xef\xbb\xbf" + VALID,
                VALID.replace(b'"q"', b'"\\ud800"'),
                b"[" * 5000 + b"]" * 5000,
                b'{"state": "x", "state": "y"}',
                b'{"a": NaN}',
                b'{"a": 1e999}',
                b"\xc3\x28",
            ]
        ),
    )
)
def test_raw_bytes(offline, data):
    offline(data)


@FUZZ
@given(body=deep_requests)
def test_deep_nesting(offline, body):
    """Within the nesting bound a body is rendered (and a sample answered), past it a 400."""
    status = offline(json.dumps(body).encode())
    assert status in (200, 400, 413, 422), status


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(depth=st.integers(1, 5000), place=st.sampled_from(sorted(PLACES)))
def test_deep_nesting_as_text(offline, depth, place):
    """Nesting too deep to build as Python objects: the parser's own limit and the bound alike,
    and the value limit before both where the brackets alone pass it."""
    template, around = PLACES[place]
    body = template.replace("V", nested(depth)).encode()
    status = offline(body)
    if count_values(body) > CFG.max_body_values:
        assert status == 413, (depth, status)
    else:
        assert status == (400 if depth + around > MAX_NESTING else 200) or status == 422, (depth, status)


@FUZZ
@given(
    payload=st.one_of(st.binary(max_size=200), st.just(VALID)),
    encoding=st.sampled_from(["gzip", "zstd"]),
    mode=st.sampled_from(["raw", "compressed", "truncated", "mislabelled"]),
    cut=st.integers(1, 40),
)
def test_compressed_bodies(offline, payload, encoding, mode, cut):
    gz, zs = gzip.compress(payload), zstandard.ZstdCompressor().compress(payload)
    data = {
        "raw": payload,
        "compressed": gz if encoding == "gzip" else zs,
        "truncated": (gz if encoding == "gzip" else zs)[:-cut],
        "mislabelled": zs if encoding == "gzip" else gz,
    }[mode]
    offline(data, {"content-encoding": encoding})


# Many tiny containers (or scalars) repeated, in any field of a request, compressed or not: what
# costs the server per value, not per byte.
units = st.sampled_from([b"[]", b"{}", b"[[]]", b"[{}]", b'{"a":[]}', b"0", b'""', b"null", b'"[,{"', b'"\\\\"'])
places = st.sampled_from(["state", "instructions", "criteria", "questions", "top"])


def amplified(unit: bytes, n: int, place: str) -> bytes:
    many = b"[" + b",".join([unit] * n) + b"]"
    question = b'{"type": "choice", "instructions": %s, "criteria": %s}' % (
        many if place == "instructions" else b'"which?"',
        many if place == "criteria" else b'["a", "b"]',
    )
    questions = b'{"q": %s%s}' % (question, b', "r": %s' % many if place == "questions" else b"")
    body = b'{"state": %s, "questions": %s%s}' % (
        many if place == "state" else b'"x"',
        questions,
        b', "extra": %s' % many if place == "top" else b"",
    )
    return body


@settings(FUZZ, max_examples=500)
@given(
    unit=units,
    n=st.one_of(st.integers(0, 64), st.integers(1000, 40_000)),
    place=places,
    encoding=st.sampled_from(["identity", "gzip", "zstd"]),
)
def test_amplified_shapes(offline, unit, n, place, encoding):
    data = amplified(unit, n, place)
    sent = {"identity": data, "gzip": gzip.compress(data), "zstd": zstandard.ZstdCompressor().compress(data)}[encoding]
    status = offline(sent, {"content-encoding": encoding})
    if len(data) <= CFG.max_decompressed_bytes and count_values(data) > CFG.max_body_values:
        assert status == 413
    elif status == 413:
        assert len(data) > CFG.max_decompressed_bytes or count_values(data) > CFG.max_body_values


def test_decompression_bomb(offline):
    bomb = zstandard.ZstdCompressor(level=19).compress(b" " * (64 << 20))
    assert len(bomb) < 10_000
    assert offline(bomb, {"content-encoding": "zstd"}) == 413


def test_fuzz_over_http(server):
    """A few hundred generated requests through the real server: never a 5xx."""
    import random

    rng = random.Random(5)
    examples = []
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for _ in range(300):
            body = {
                "state": rng.choice(["x", {"a": [1, None]}, ["t1", "t2"], 5, None]),
                "questions": {
                    "q%d" % j: rng.choice(
                        [
                            {
                                "type": "choice",
                                "instructions": "pick",
                                "criteria": rng.choice([[], ["a"], {"a": None, "b": 1}, "x"]),
                            },
                            {
                                "type": "score",
                                "instructions": rng.choice(["r", None, 3, []]),
                                "criteria": ["l", "m", None][: rng.randint(0, 3)],
                            },
                            {
                                "type": rng.choice(["noul", "other", 7]),
                                "instructions": "ok?",
                                "criteria": rng.choice([None, {"TRUE": "y"}, {"maybe": 1}]),
                            },
                        ]
                    )
                    for j in range(rng.randint(0, 4))
                },
            }
            if rng.random() < 0.2:
                body["model"] = rng.choice(["english", "laya", "zzz", 5])
            r = client.post("/v1/systemone", json=body)
            assert r.status_code < 500, r.text
            if r.status_code != 200:
                assert r.json()["code"] in KNOWN
            examples.append(r.status_code)
    assert {200, 422} <= set(examples)


# Bytes for the request line and header values: UTF-8 past Latin-1 and within it, bytes that are
# not UTF-8, control bytes, escapes, and plain text.
RAW_PIECES = [
    b"\xe2\x82\xac",
    b"\xc3\xa9",
    b"\xf0\x9f\x98\x80",
    b"\xff",
    b"\xfe\xff",
    b"\x80",
    b"\x00",
    b"\x1b",
    b"\t",
    b"%FF",
    b"%00",
    b"%E2%82%AC",
    b"%",
    b"?",
    b"#",
    b"/",
    b"..",
    b"a",
    b"=",
    b"&",
    b";",
    b" ",
]
RAW_ROUTES = [
    b"/livez",
    b"/readyz",
    b"/health",
    b"/metrics",
    b"/v1/models",
    b"/schema",
    b"/schema/docs",
    b"/v1/systemone",
    b"/nope",
]
raw_text = st.lists(st.sampled_from(RAW_PIECES), max_size=8).map(b"".join)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    route=st.sampled_from(RAW_ROUTES),
    path=raw_text,
    query=raw_text,
    value=raw_text,
    name=st.sampled_from([b"X-Note", b"Prefer", b"X-Request-Id", b"Authorization", b"Content-Type", b"Accept"]),
    post=st.booleans(),
)
def test_raw_request_lines_over_http(server, route, path, query, value, name, post):
    """Raw bytes in the path, the query and a header value: never a 5xx, and every answer the app
    gives carries a request id (only Granian's own refusal of what is not HTTP has none)."""
    body = VALID if post else b""
    head = (
        (b"POST " if post else b"GET ")
        + route
        + path
        + b"?"
        + query
        + b" HTTP/1.1\r\nHost: x\r\n"
        + name
        + b": "
        + value
        + b"\r\nContent-Type: application/json\r\n"
        + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(head + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    answer_head, _, content = data.partition(b"\r\n\r\n")
    assert status < 500, (head, data[:300])
    assert b"\r\nx-request-id: " in answer_head.lower() or (status == 400 and not content), (head, data[:300])


def test_fuzzing_reached_the_model(offline):
    """Runs last in this module: the generators produced valid requests, not only rejections."""
    assert offline.ran >= 100
