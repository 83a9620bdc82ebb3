"""What a hostile or unlucky client can do at the server's edges: raw bytes in the request line and
headers, bodies nested past what rendering takes, oversized headers, a killed main process; and
what a 500 says and logs. Real Granian processes on loopback (tests/server.py)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import socket
import time

import httpx
import pytest

from app.body import parse_json
from app.problems import Problem
from app.routes.common import Repeats
from models.nesting import MAX_NESTING
from tests.app.test_http import BODY, assert_problem
from tests.conftest import run_server

ROUTES = [
    "/livez",
    "/readyz",
    "/health",
    "/metrics",
    "/v1/models",
    "/schema",
    "/schema/docs",
    "/v1/systemone",
    "/nope",
    "/v1/nope",
]
# Raw bytes a client may put in a query, a path or a header value: UTF-8 beyond Latin-1, UTF-8
# within it, an emoji, and escapes of bytes that are not UTF-8.
TEXTS = [b"\xe2\x82\xac", b"caf\xc3\xa9", b"\xf0\x9f\x98\x80", b"%FF%FE", b"a%00b"]


def exchange(port: int, request: bytes, timeout: float = 15) -> tuple[int, dict[str, str], bytes]:
    """(status, headers by lower-case name, body) of the one answer to `request` (sent with
    `Connection: close`)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(request)  # refused before it was read: the answer is still there
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, headers, body


def request(method: str, target: bytes, headers: bytes = b"", body: bytes | None = None) -> bytes:
    if body is not None:
        headers += b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
    return (
        method.encode()
        + b" "
        + target
        + b" HTTP/1.1\r\nHost: x\r\n"
        + headers
        + b"Connection: close\r\n\r\n"
        + (body or b"")
    )


def test_raw_bytes_in_the_request_line_and_headers_never_5xx(server):
    """Raw UTF-8 in a query, a path or a header value, on every route, under both interfaces:
    answered by the app (never a 5xx, always with a request id)."""
    valid = json.dumps(BODY).encode()
    answered = []
    for route in ROUTES:
        for text in TEXTS:
            for method, body in (("GET", None), ("POST", valid)):
                cases = [
                    (route.encode() + b"?q=" + text + b"&x=1", b""),
                    (route.encode() + b"/" + text, b""),
                    (
                        route.encode(),
                        b"X-Note: " + text + b"\r\nPrefer: profile=" + text + b"\r\n"
                        b"X-Request-Id: " + text + b"\r\nAuthorization: Bearer " + text + b"\r\n",
                    ),
                ]
                for target, headers in cases:
                    status, head, content = exchange(server.port, request(method, target, headers, body))
                    assert status < 500, (method, target, headers, status, content)
                    assert head.get("x-request-id"), (method, target, headers, status)
                    answered.append(status)
    # The decision route takes a valid body whatever the query holds.
    status, _, content = exchange(server.port, request("POST", b"/v1/systemone?q=\xe2\x82\xac", body=valid))
    assert status == 200, content
    assert {200, 404, 405} <= set(answered)


def test_bytes_granian_refuses_are_a_4xx(server):
    """What is not UTF-8 in the request line, or not a header name, Granian refuses itself (no
    request id: the app never sees it), never with a 5xx."""
    for raw in (
        request("GET", b"/livez?q=\xff\xfe"),
        request("GET", b"/\xff"),
        request("GET", b"/livez", b"X-\xe2\x82\xac: 1\r\n"),
        request("GET", b"/livez", b"X-A\x00: 1\r\n"),
    ):
        status, _, _ = exchange(server.port, raw)
        assert 400 <= status < 500, (raw, status)
    assert httpx.get(server.url + "/livez").status_code == 200


def nested(depth: int, leaf: str = '"x"') -> str:
    """JSON text of `depth` arrays and objects, one inside the other, around `leaf`."""
    opens = "".join("[" if i % 2 else '{"k": ' for i in range(depth))
    return opens + leaf + "".join("]" if i % 2 else "}" for i in reversed(range(depth)))


# Where a question type's nested value sits: JSON text with `V` for it, and how many levels of
# objects and arrays the body holds around V (the body itself is the first).
PLACES = {
    "choice criteria": (
        '{"state": "x", "questions": {"q": {"type": "choice", "instructions": "i", "criteria": {"a": V, "b": null}}}}',
        4,
    ),
    "score levels": (
        '{"state": "x", "questions": {"q": {"type": "score", "instructions": "i", "criteria": ["low", V]}}}',
        4,
    ),
    "noul criteria": (
        '{"state": "x", "questions": {"q": {"type": "noul", "instructions": "i", '
        '"criteria": {"true": V, "false": "no"}}}}',
        4,
    ),
    "instructions": ('{"state": "x", "questions": {"q": {"type": "noul", "instructions": V}}}', 3),
    "state": ('{"state": V, "questions": {"q": {"type": "noul", "instructions": "i"}}}', 1),
}


@pytest.mark.parametrize("place", list(PLACES))
def test_deep_nesting_is_answered_or_refused_with_a_4xx(server, place):
    template, around = PLACES[place]
    with httpx.Client(base_url=server.url, timeout=30) as client:

        def send(depth):
            return client.post(
                "/v1/systemone",
                content=template.replace("V", nested(depth)).encode(),
                headers={"content-type": "application/json"},
            )

        r = send(MAX_NESTING - around)  # at the limit: rendered and answered
        assert r.status_code == 200, r.text
        for depth in (MAX_NESTING - around + 1, 500, 960, 990, 5000):
            body = assert_problem(send(depth), 400, "malformed_request")
            assert str(MAX_NESTING) in body["detail"], body


def test_headers_over_the_limit_are_431_with_a_request_id(server):
    from app.middleware import MAX_HEADER_BYTES

    fits = b"a" * (MAX_HEADER_BYTES - 1024)
    assert httpx.get(server.url + "/livez", headers={"x-big": fits.decode()}).status_code == 200
    for size in (MAX_HEADER_BYTES + 1, 200_000, 300_000):
        for method, route, body in (("GET", b"/livez", None), ("POST", b"/v1/systemone", json.dumps(BODY).encode())):
            status, head, content = exchange(
                server.port, request(method, route, b"X-Big: " + b"a" * size + b"\r\n", body)
            )
            assert status == 431, (size, route, status)
            problem = json.loads(content)
            assert problem["code"] == "headers_too_large" and str(MAX_HEADER_BYTES) in problem["detail"]
            assert problem["instance"] == head["x-request-id"]
    # Past Granian's read buffer Granian refuses the head itself, before the app: a 431 still.
    status, _, _ = exchange(
        server.port, request("POST", b"/v1/systemone", b"X-Big: " + b"a" * 600_000 + b"\r\n", json.dumps(BODY).encode())
    )
    assert status == 431
    # Many headers, each small, count in all.
    many = b"".join(b"X-H%d: %s\r\n" % (i, b"b" * 1000) for i in range(70))
    status, _, _ = exchange(server.port, request("GET", b"/livez", many))
    assert status == 431
    assert httpx.post(server.url + "/v1/systemone", json=BODY).status_code == 200


def h2_get(port: int, path: bytes, extra: bytes) -> bytes:
    """The DATA of one HTTP/2 GET over cleartext (prior knowledge), with an `x-big: <extra>` header;
    b"" where the server refused the stream or the connection. HPACK literals, no Huffman."""

    def frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
        return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload

    def number(n: int) -> bytes:  # HPACK integer, 7-bit prefix
        if n < 127:
            return bytes([n])
        out, n = [127], n - 127
        while n >= 128:
            out.append(n % 128 + 128)
            n //= 128
        return bytes(out + [n])

    def literal(name: bytes, value: bytes) -> bytes:
        return b"\x00" + number(len(name)) + name + number(len(value)) + value

    block = b"\x82\x86" + literal(b":path", path) + literal(b":authority", b"x") + literal(b"x-big", extra)
    parts = [block[i : i + 16384] for i in range(0, len(block), 16384)]
    frames = b"".join(
        frame(1 if i == 0 else 9, (0x1 if i == 0 else 0) | (0x4 if i == len(parts) - 1 else 0), 1, part)
        for i, part in enumerate(parts)
    )
    with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"") + frames)
        data, body = b"", b""
        while True:
            while len(data) >= 9 and len(data) >= 9 + int.from_bytes(data[:3], "big"):
                size, kind, flags = int.from_bytes(data[:3], "big"), data[3], data[4]
                stream = int.from_bytes(data[5:9], "big") & 0x7FFFFFFF
                payload, data = data[9 : 9 + size], data[9 + size :]
                if kind == 0 and stream == 1:
                    body += payload
                    if flags & 0x1:
                        return body
                elif (kind == 1 and stream == 1 and flags & 0x1) or kind in (3, 7):
                    return body  # answered without a body, reset, or gone away
            chunk = s.recv(65536)
            if not chunk:
                return body
            data += chunk


def test_http2_headers_over_the_limit_are_431_too(server):
    from app.launch import HTTP2_MAX_HEADERS
    from app.middleware import MAX_HEADER_BYTES

    assert json.loads(h2_get(server.port, b"/livez", b"a" * 1000)) == {"status": "ok"}
    refused = json.loads(h2_get(server.port, b"/livez", b"a" * (MAX_HEADER_BYTES + 1)))
    assert refused["code"] == "headers_too_large" and refused["status"] == 431
    # Past what Granian is told to hold, Granian refuses the stream itself.
    assert b"status" not in h2_get(server.port, b"/livez", b"a" * (HTTP2_MAX_HEADERS + 1))
    assert httpx.get(server.url + "/livez").status_code == 200


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


def _gone(pid: int) -> bool:
    """Exited: no such process, or a zombie no one has reaped yet."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the worker through /proc")
def test_a_worker_whose_main_process_is_killed_stops_serving(english, tmp_path):
    with run_server(tmp_path, {"OMNI_MODELS": english[1]}) as s:
        workers = _children(s.proc.pid)
        assert len(workers) == 1, workers
        assert httpx.get(s.url + "/livez").status_code == 200
        os.kill(s.proc.pid, signal.SIGKILL)
        s.proc.wait(10)
        deadline = time.monotonic() + 15
        while not _gone(workers[0]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(workers[0]), "the worker outlived its main process:\n" + s.log()
        with pytest.raises(httpx.TransportError):
            httpx.get(s.url + "/livez", timeout=2)
        # The port is free for a restarted server, which then serves alone.
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", s.port))
    assert "Stopping worker-1" in s.log()  # Granian's own graceful stop


def test_a_500_says_internal_server_error():
    internal, _ = Problem(500, "internal_error", "internal error; it is logged").render("r", "reference")
    failed, _ = Problem(500, "inference_failed", "the forward pass failed").render("r", "reference")
    assert json.loads(internal)["title"] == "Internal server error"
    assert json.loads(failed)["title"] == "Inference failed"


def test_a_repeated_error_logs_its_traceback_once_per_interval(caplog):
    repeats = Repeats(interval_s=3600)

    def fail(n):
        try:
            raise RuntimeError("a bug %d" % n) if n >= 0 else KeyError("elsewhere")
        except Exception as exc:
            return exc

    with caplog.at_level(logging.ERROR, logger="omni"):
        for n in range(50):
            repeats.log("GET", "/x", fail(n))
        repeats.log("GET", "/y", fail(-1))  # another site: its own traceback
    records = [r for r in caplog.records if "unhandled error" in r.getMessage()]
    assert len(records) == 51
    assert [r.exc_info is not None for r in records].count(True) == 2
    assert all("\n" not in r.getMessage() for r in records)
    assert "again" in records[1].getMessage() and "RuntimeError" in records[1].getMessage()
    repeats.interval_s = 0  # the interval has passed
    with caplog.at_level(logging.ERROR, logger="omni"):
        repeats.log("GET", "/x", fail(1))
    assert caplog.records[-1].exc_info is not None and "49 more like it" in caplog.records[-1].getMessage()


@pytest.mark.parametrize(
    "content",
    [
        b'{"a": ' + b"1" * 5000 + b"}",
        b"\xef\xbb\xbf\xef\xbb\xbf{}",
        b"[1]",
        b"null",
        b'"text"',
        b"5",
        b"[" * 2000 + b"]" * 2000,
    ],
)
def test_problem_details_speak_json_not_python(content):
    with pytest.raises(Problem) as info:
        parse_json(content)
    detail = info.value.detail
    assert not re.search(r"sys\.|utf-8-sig|NoneType|\b(list|dict|str|int|float)\b|[Rr]ecursion", detail), detail


def test_swagger_ui_loads_nothing_from_elsewhere(server):
    pytest.importorskip("swagger_ui_bundle")
    page = httpx.get(server.url + "/schema/docs").text
    assert "SwaggerUIBundle" in page and "http://" not in page and "https://" not in page.split("spec:")[0]
    for asset in ("swagger-ui-bundle.js", "swagger-ui-standalone-preset.js", "swagger-ui.css", "favicon-32x32.png"):
        r = httpx.get(server.url + "/schema/assets/" + asset)
        assert r.status_code == 200 and len(r.content) > 100, asset
