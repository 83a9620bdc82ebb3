"""HTTP contract against a real Granian process: answers, headers, health, every error code."""

from __future__ import annotations

import gzip
import json
import re
import socket
import time

import httpx
import pytest
import zstandard
from prometheus_client.parser import text_string_to_metric_families

from models.laya.served import WARMUP_REQUEST
from tests.conftest import run_server
import contextlib

BODY = {"model": "english", **WARMUP_REQUEST}  # docs/api.md's example request
SERVER_TIMING = re.compile(r"^[a-z]+;dur=\d+(\.\d+)?$")


def post(server, body=None, *, content=None, headers=None, path="/v1/systemone"):
    h = {"content-type": "application/json", **(headers or {})}
    if content is None:
        content = json.dumps(body).encode()
    return httpx.post(server.url + path, content=content, headers=h, timeout=30)


def timing(response) -> dict[str, float]:
    parts = [p.strip() for p in response.headers["server-timing"].split(",")]
    assert all(SERVER_TIMING.match(p) for p in parts), parts
    return {p.split(";")[0]: float(p.split("=")[1]) for p in parts}


def assert_problem(response, status: int, code: str):
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["status"] == status and body["code"] == code
    assert body["title"] and body["detail"] and body["type"].startswith("https://")
    assert body["instance"] == response.headers["x-request-id"]
    assert "total" in timing(response)
    return body


# -- success path --------------------------------------------------------------------------


def test_answers_match_the_in_process_pipeline(server, pipeline_english):
    r = post(server, BODY)
    assert r.status_code == 200, r.text
    body = r.json()
    expected = pipeline_english(BODY)
    assert body["answers"] == expected["answers"]
    assert body["usage"] == expected["usage"]
    assert body["model"] == "english"
    assert body["served_by"]["device"] == "cpu"
    assert body["served_by"]["random_weights"] is True
    assert body["served_by"]["runtime"].startswith("onnxruntime ")
    assert list(body["answers"]) == ["department", "urgency", "refund"]
    stages = timing(r)
    assert {"decode", "prepare", "queue", "infer", "finish", "total"} <= set(stages)
    assert stages["total"] >= stages["infer"]


def test_request_id_echoed_or_generated(server):
    r = post(server, BODY, headers={"x-request-id": "client-abc_123"})
    assert r.headers["x-request-id"] == "client-abc_123"
    bad = post(server, BODY, headers={"x-request-id": "has space"})
    assert bad.headers["x-request-id"] != "has space" and len(bad.headers["x-request-id"]) == 32
    err = post(server, content=b"{", headers={"x-request-id": "mine-1"})
    assert err.json()["instance"] == "mine-1"


def test_model_names_aliases_and_default(server):
    for name in ("english", "laya", "EN", "jev-latest", None):
        body = dict(BODY, model=name) if name else {k: v for k, v in BODY.items() if k != "model"}
        r = post(server, body)
        assert r.status_code == 200 and r.json()["model"] == "english", (name, r.text)
    problem = assert_problem(post(server, dict(BODY, model="gpt-5")), 422, "unknown_model")
    assert "english" in problem["detail"]


def test_unknown_top_level_fields_are_ignored(server):
    assert post(server, dict(BODY, future_field={"x": 1})).status_code == 200


def test_compressed_bodies(server):
    raw = json.dumps(BODY).encode()
    z = post(server, content=zstandard.ZstdCompressor().compress(raw), headers={"content-encoding": "zstd"})
    g = post(server, content=gzip.compress(raw), headers={"content-encoding": "gzip"})
    plain = post(server, BODY)
    assert z.status_code == g.status_code == 200
    assert z.json()["answers"] == g.json()["answers"] == plain.json()["answers"]


def test_jev_profile_per_request(server):
    r = post(server, BODY, headers={"prefer": "profile=jev"})
    body = r.json()
    assert set(body) == {"model", "answers", "usage", "x_usage", "x_routing", "x_served_by"}
    assert body["usage"] == {"input_tokens": body["usage"]["input_tokens"], "output_tokens": 0}
    choice = body["answers"]["department"]
    p = list(choice["probabilities"].values())
    assert choice["confidence"] == pytest.approx((max(p) - 0.5) / 0.5, abs=1e-9)
    assert "confidence" not in body["answers"]["refund"]
    assert all(
        k.startswith("x_")
        for a in body["answers"].values()
        for k in a
        if k not in ("type", "choice", "score", "noul", "probabilities", "confidence", "legend")
    )
    problem = post(server, {"state": "x", "questions": {"a": {"type": "choice"}}}, headers={"prefer": "profile=jev"})
    assert problem.status_code == 422
    assert problem.json()["detail"][0]["loc"] == ["body", "questions", "a"]
    for content in (b"[1]", b'{"state": "x", "questions": {'):  # Jev answers a body it cannot read as 422
        unread = post(server, content=content, headers={"prefer": "profile=jev"})
        assert unread.status_code == 422 and unread.headers["content-type"] == "application/json"
        assert unread.json()["detail"] == [
            {"loc": ["body"], "msg": unread.json()["detail"][0]["msg"], "type": "malformed_request"}
        ]
    assert post(server, content=b"[1]").status_code == 400  # the reference profile's 400


# -- health and discovery --------------------------------------------------------------------


def test_health_models_schema_metrics(server):
    assert httpx.get(server.url + "/livez").json() == {"status": "ok"}
    for path in ("/readyz", "/health"):
        r = httpx.get(server.url + path)
        assert r.status_code == 200
        # /readyz lists the models; /health keys them by name (docs/api.md)
        (m,) = r.json()["models"] if path == "/readyz" else r.json()["models"].values()
        assert m["state"] == "ready" and m["device"] == "cpu" and m["weights_dtype"] == "float32"
        assert m["warmup_ms"] > 0 and m["limits"]["max_questions"] == 64
        assert m["cuda_graphs"] == "off" and "cuda_graphs_refused" not in m  # the CPU replays none
        assert m["checkpoint"].startswith("local:") and "/" not in m["checkpoint"]
    models = httpx.get(server.url + "/v1/models").json()["models"]
    assert models[0]["name"] == "english" and "jev-latest" in models[0]["aliases"] and "laya" in models[0]["aliases"]
    doc = httpx.get(server.url + "/schema").json()
    assert doc["openapi"].startswith("3.")
    op = doc["paths"]["/v1/systemone"]["post"]
    assert "requestBody" in op and {"200", "422", "503"} <= set(op["responses"])
    for path in ("/livez", "/readyz", "/v1/models", "/metrics"):
        assert path in doc["paths"]

    def count(text):
        for fam in text_string_to_metric_families(text):
            if fam.name == "omni_requests":
                return sum(
                    s.value
                    for s in fam.samples
                    if s.labels.get("route") == "/v1/systemone"
                    and s.labels.get("status") == "200"
                    and s.name.endswith("_total")
                )
        return 0

    before = count(httpx.get(server.url + "/metrics").text)
    for _ in range(3):
        post(server, BODY)
    after = count(httpx.get(server.url + "/metrics").text)
    assert after == before + 3


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content,why",
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe{}", "invalid UTF-8"),
        (b'{"state": "a", "state": "b", "questions": {}}', "duplicate keys"),
        (b'{"state": NaN, "questions": {}}', "NaN"),
        (b'{"state": 1e999, "questions": {}}', "Infinity"),
        (b'["not", "an", "object"]', "not an object"),
        (b'{"state": "\\ud800", "questions": {"q": {"type": "noul", "instructions": "x"}}}', "lone surrogate"),
        (b"", "empty"),
        (b"[" * 100000, "deep nesting"),
    ],
)
def test_malformed_bodies_are_400(server, content, why):
    assert_problem(post(server, content=content), 400, "malformed_request")


def test_bad_compression_is_400(server):
    assert_problem(
        post(server, content=b"not zstd at all", headers={"content-encoding": "zstd"}), 400, "malformed_request"
    )
    truncated = gzip.compress(json.dumps(BODY).encode())[:-12]
    assert_problem(post(server, content=truncated, headers={"content-encoding": "gzip"}), 400, "malformed_request")


def test_media_type_and_encoding_415(server):
    assert_problem(post(server, BODY, headers={"content-type": "text/plain"}), 415, "unsupported_media_type")
    assert_problem(post(server, BODY, headers={"content-encoding": "br"}), 415, "unsupported_media_type")


def test_route_and_method_errors(server):
    assert_problem(httpx.get(server.url + "/v2/nothing"), 404, "not_found")
    r = httpx.get(server.url + "/v1/systemone")
    assert_problem(r, 405, "method_not_allowed")
    assert "POST" in r.headers["allow"]


def test_schema_and_question_errors_are_422(server):
    assert_problem(post(server, {"questions": BODY["questions"]}), 422, "invalid_request")
    assert_problem(post(server, {"state": 12, "questions": BODY["questions"]}), 422, "invalid_request")
    assert_problem(post(server, {"state": "x", "questions": {}}), 422, "invalid_request")
    assert_problem(post(server, {"state": "x", "questions": ["q"]}), 422, "invalid_request")
    body = assert_problem(
        post(
            server,
            {
                "state": "x",
                "questions": {
                    "ok": {"type": "noul", "instructions": "fine"},
                    "no_type": {"instructions": "x"},
                    "bad_choice": {"type": "choice", "instructions": "x", "criteria": []},
                    "bad_score": {"type": "score", "instructions": "x", "criteria": ["a", None]},
                    "bad_noul": {"type": "noul", "instructions": "x", "criteria": {"maybe": "?"}},
                    "too_many": {"type": "choice", "instructions": "x", "criteria": {str(i): None for i in range(256)}},
                },
            },
        ),
        422,
        "invalid_question",
    )
    assert [e["question"] for e in body["errors"]] == ["no_type", "bad_choice", "bad_score", "bad_noul", "too_many"]
    overflow = assert_problem(
        post(
            server,
            {
                "state": "x",
                "questions": {
                    "wide": {
                        "type": "choice",
                        "instructions": "x",
                        "criteria": {"option %d" % i: None for i in range(200)},
                    }
                },
            },
        ),
        422,
        "invalid_question",
    )
    assert "max_len" in overflow["errors"][0]["detail"]


def test_too_many_questions_is_413(server):
    questions = {"q%d" % i: {"type": "noul", "instructions": "x"} for i in range(65)}
    assert_problem(post(server, {"state": "x", "questions": questions}), 413, "too_many_questions")


def _raw(server, request: bytes, wait: float = 0.0) -> bytes:
    """The response's head to `request`. A server that answers and closes before it has read the
    whole request (a refused oversized head) can break the send: its answer, sent before its
    close, is still in this socket's receive queue, so it is read all the same."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=15) as s:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(request)
        if wait:
            time.sleep(wait)
        data = b""
        while b"\r\n\r\n" not in data or len(data) < 60:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
        return data


def test_length_required_411(server):
    head = _raw(
        server, b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
    )
    assert head.startswith(b"HTTP/1.1 411"), head[:200]


@pytest.fixture(scope="module", params=["rsgi", "asgi"])
def limited(english, tmp_path_factory, request):
    """Tight body limits, through both of Granian's interfaces (each reads the body its own way)."""
    env = {
        "OMNI_MODELS": english[1],
        "OMNI_MAX_BODY_BYTES": "2048",
        "OMNI_BODY_TIMEOUT_S": "1",
        "OMNI_MAX_DECOMPRESSED_BYTES": "4096",
    }
    with run_server(tmp_path_factory.mktemp("limited"), env, interface=request.param) as s:
        yield s


def test_body_limits_413(limited):
    big = dict(BODY, state="x" * 3000)
    assert_problem(post(limited, big), 413, "too_large")  # Content-Length
    chunks = (json.dumps(big).encode()[i : i + 500] for i in range(0, 3200, 500))
    r = httpx.post(limited.url + "/v1/systemone", content=chunks, headers={"content-type": "application/json"})
    assert_problem(r, 413, "too_large")  # while streaming
    bomb = zstandard.ZstdCompressor().compress(json.dumps(dict(BODY, state="y" * 100000)).encode())
    assert len(bomb) < 2048
    assert_problem(post(limited, content=bomb, headers={"content-encoding": "zstd"}), 413, "too_large")
    assert post(limited, BODY).status_code == 200


def test_slow_body_408(limited):
    head = _raw(
        limited,
        b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Content-Length: 100\r\nConnection: close\r\n\r\n{"state":',
        wait=1.5,
    )
    assert head.startswith(b"HTTP/1.1 408"), head[:200]
    assert b"request_timeout" in head


def test_auth(english, tmp_path):
    with run_server(tmp_path, {"OMNI_MODELS": english[1], "OMNI_API_KEY": "s3cret-key"}) as s:
        r = post(s, BODY)
        assert_problem(r, 401, "unauthorized")
        assert r.headers["www-authenticate"].lower().startswith("bearer")
        assert_problem(post(s, BODY, headers={"authorization": "Bearer wrong"}), 401, "unauthorized")
        assert_problem(httpx.get(s.url + "/v1/models"), 401, "unauthorized")
        assert post(s, BODY, headers={"authorization": "Bearer s3cret-key"}).status_code == 200
        for path in ("/livez", "/readyz", "/metrics"):
            assert httpx.get(s.url + path).status_code == 200
        assert "s3cret-key" not in httpx.get(s.url + "/readyz").text
        assert "s3cret-key" not in s.log()


HEAVY = {
    "state": "The customer wrote again about the refund. " * 60,
    "questions": {
        "q%d" % i: {
            "type": "choice",
            "instructions": "Pick %d" % i,
            "criteria": {"a": "first option", "b": "second option", "c": None},
        }
        for i in range(16)
    },
}


def test_overload_503_with_retry_after(english, tmp_path):
    import concurrent.futures as cf

    with run_server(tmp_path, {"OMNI_MODELS": english[1], "OMNI_QUEUE_SIZE": "1", "OMNI_MAX_BATCH_ROWS": "16"}) as s:
        with cf.ThreadPoolExecutor(48) as pool:
            responses = list(pool.map(lambda _: post(s, HEAVY), range(96)))
        statuses = [r.status_code for r in responses]
        assert set(statuses) <= {200, 503}, statuses
        assert statuses.count(503) > 0 and statuses.count(200) > 0
        for r in responses:
            if r.status_code == 503:
                assert_problem(r, 503, "overloaded")
                assert int(r.headers["retry-after"]) >= 1
            else:
                assert list(r.json()["answers"]) == list(HEAVY["questions"])
        # Refused with the queue full already: before the body was read, and the connection closed.
        early = [r for r in responses if r.status_code == 503 and r.headers.get("connection") == "close"]
        assert early and all("already waiting" in r.json()["detail"] for r in early)


def test_deadline_504(english, tmp_path):
    with run_server(tmp_path, {"OMNI_MODELS": english[1], "OMNI_REQUEST_TIMEOUT_S": "0.002"}) as s:
        assert_problem(post(s, HEAVY), 504, "deadline_exceeded")
        assert httpx.get(s.url + "/readyz").status_code == 200


def test_not_ready_until_warm(english, tmp_path):
    with run_server(tmp_path, {"OMNI_MODELS": english[1], "OMNI_WARMUP_REQUESTS": "400"}, wait_ready=False) as s:
        assert httpx.get(s.url + "/livez").status_code == 200
        r = httpx.get(s.url + "/readyz")
        body = assert_problem(r, 503, "not_ready")
        assert r.headers["retry-after"] == "1"
        assert body["models"][0]["state"] in ("loading", "warming")
        assert_problem(post(s, BODY), 503, "not_ready")
        deadline = time.monotonic() + 60
        while httpx.get(s.url + "/readyz").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert post(s, BODY).status_code == 200


def test_fatal_load_failure_is_not_ready(english, tmp_path):
    # This machine has no CUDA provider: asking for the GPU explicitly is a fatal load failure.
    with run_server(tmp_path, {"OMNI_MODELS": english[1], "OMNI_DEVICE": "cuda:0"}, wait_ready=False) as s:
        deadline = time.monotonic() + 30
        while True:
            body = httpx.get(s.url + "/readyz").json()
            if body["models"][0]["state"] == "failed":
                break
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert "CUDA" in body["models"][0]["error"]
        assert_problem(post(s, BODY), 503, "not_ready")
        deadline = time.monotonic() + 60  # live while it is rebuilt; then a new process is due
        while httpx.get(s.url + "/livez").status_code == 200:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        live = assert_problem(httpx.get(s.url + "/livez"), 503, "not_live")
        assert "english" in live["detail"] and "CUDA" in live["detail"] and "after 3 rebuilds" in live["detail"]


def test_oversized_headers_are_refused_before_the_app(server):
    """Past Granian's HTTP/1 read buffer Granian itself refuses the head with 431 (the app's own
    64 KiB bound, with a problem body: tests/app/test_edges.py)."""
    head = _raw(
        server,
        b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nX-Big: "
        + b"a" * 600_000
        + b"\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
    )
    assert head.startswith(b"HTTP/1.1 431")
    assert post(server, BODY).status_code == 200
