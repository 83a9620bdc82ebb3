"""Metrics, logs and the dashboard against a real Granian process: label sets that no client can
grow, the end-to-end latency histogram, process and build metrics, one access line per request
and the request id on every line logged while serving it, as text and as JSON."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import string
import time
import tomllib

import httpx
import onnxruntime
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app import __version__
from app.launch import GRANIAN_JSON_LOG
from tests.app.test_http import BODY
from tests.conftest import ROOT, run_server

FAULTY = "tests.app.faulty_app:app"
FAULT_MODEL = "fault"  # the models faulty_app fails on, each at a place of its own
FRESH_FAULT = "fault-2"  # hit once per server: its traceback is logged
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "dashboards", "system1-omni.json")
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = "00-%s-00f067aa0ba902b7-01" % TRACE_ID
# The app's routes; every other path is one value.
ROUTES = {"/v1/systemone", "/v1/models", "/livez", "/readyz", "/health", "/metrics", "/schema"}


def known(route: str) -> bool:
    """One of the app's routes, a router's template (`/schema/docs/{path}`), or `unmatched`."""
    return route in ROUTES or route == "unmatched" or "{" in route


def scrape(server) -> dict[str, list]:
    """Samples by family name (a counter's family drops `_total`), every family listed."""
    text = httpx.get(server.url + "/metrics", timeout=10).text
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def sample(families, family: str, name: str, **labels) -> float | None:
    for s in families[family]:
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return None


def wait_for(server, predicate, timeout: float = 10.0) -> str:
    """The server's log once `predicate(log)` holds (lines are written as requests end)."""
    deadline = time.monotonic() + timeout
    while True:
        text = server.log()
        if predicate(text) or time.monotonic() > deadline:
            return text
        time.sleep(0.05)


@pytest.fixture(scope="module")
def served(english, tmp_path_factory):
    """The english export behind the app as served, with the test fault (tests/app/faulty_app.py)."""
    with run_server(tmp_path_factory.mktemp("telemetry"), {"OMNI_MODELS": english[1]}, target=FAULTY) as s:
        yield s


# -- metrics ---------------------------------------------------------------------------------


def test_metrics_name_routes_models_codes_the_process_and_the_build(served):
    url = served.url
    assert httpx.post(url + "/v1/systemone", json=BODY, timeout=30).status_code == 200
    assert httpx.post(url + "/v1/systemone", json={**BODY, "model": "nope"}, timeout=30).status_code == 422
    assert httpx.post(url + "/v1/systemone", json={**BODY, "model": FAULT_MODEL}, timeout=30).status_code == 500
    assert httpx.get(url + "/v1/models").status_code == 200
    assert httpx.get(url + "/v1/no-such-thing").status_code == 404
    families = scrape(served)

    routes = {s.labels["route"] for s in families["omni_requests"]}
    assert all(map(known, routes)) and {"/v1/systemone", "/v1/models", "unmatched"} <= routes
    assert sample(families, "omni_requests", "omni_requests_total", route="unmatched", status="404") >= 1
    # A model is a label once the server has resolved it: the names clients send ("nope") never are.
    for family in ("omni_requests", "omni_request_duration_seconds", "omni_request_seconds"):
        assert {s.labels["model"] for s in families[family]} <= {"", "english"}, family

    # End to end, by model and HTTP status code: buckets that add up, a sum, a count.
    duration = "omni_request_duration_seconds"
    assert sample(families, duration, duration + "_count", model="english", code="200") >= 1
    assert sample(families, duration, duration + "_count", model="", code="422") >= 1
    assert sample(families, duration, duration + "_count", model="", code="500") >= 1
    assert sample(families, duration, duration + "_bucket", model="english", code="200", le="+Inf") >= 1
    assert sample(families, duration, duration + "_sum", model="english", code="200") > 0
    assert {tuple(sorted(s.labels)) for s in families[duration]} == {("code", "model"), ("code", "le", "model")}

    assert sample(families, "process_resident_memory_bytes", "process_resident_memory_bytes") > 10 * 2**20
    assert sample(families, "python_gc_collections", "python_gc_collections_total", generation="0") is not None
    assert (
        sample(families, "python_gc_objects_collected", "python_gc_objects_collected_total", generation="2") is not None
    )

    (build,) = families["omni_build_info"]
    assert build.value == 1 and build.labels == {
        "version": __version__,
        "onnxruntime": onnxruntime.__version__,
        "device": "cpu",
    }
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        assert tomllib.load(f)["project"]["version"] == __version__


def _junk(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits + "-_.~") for _ in range(n))


@pytest.mark.parametrize("api_key", [None, "sesame"])
def test_a_flood_of_unknown_paths_adds_no_series(english, tmp_path, api_key):
    """An attack on /metrics (issue 46): thousands of requests to paths the server does not
    serve, under /v1/ and /schema and elsewhere, in every method, unauthenticated. The routes
    counted stay the app's own plus `unmatched`, and /metrics stays the size it was."""
    env = {"OMNI_MODELS": english[1], **({"OMNI_API_KEY": api_key} if api_key else {})}
    rng = random.Random(46)
    prefixes = ["/v1/", "/v1/systemone/", "/v1/models/", "/schema/", "/schema/docs/", "/schema", "/", "/metrics/"]
    requests = [
        (
            rng.choice(["GET", "POST", "PUT", "DELETE", "PATCH"]),
            rng.choice(prefixes)
            + _junk(rng, rng.randint(1, 40))
            + (("?" + _junk(rng, 8)) if rng.random() < 0.3 else ""),
        )
        for _ in range(2000)
    ]

    async def flood(url: str) -> list[int]:
        gate = asyncio.Semaphore(16)
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:

            async def one(method: str, path: str) -> int:
                async with gate:
                    return (await client.request(method, path)).status_code

            return await asyncio.gather(*(one(m, p) for m, p in requests))

    with run_server(tmp_path, env) as s:
        httpx.get(s.url + "/metrics")  # the scrape's own series exist before
        before = httpx.get(s.url + "/metrics").text
        statuses = asyncio.run(flood(s.url))
        after = httpx.get(s.url + "/metrics").text
        log = s.log()
    assert set(statuses) <= {401, 404, 405}, sorted(set(statuses))
    families = {f.name: f.samples for f in text_string_to_metric_families(after)}
    series = [s.labels for s in families["omni_requests"] if s.name == "omni_requests_total"]
    assert all(known(s["route"]) for s in series), series
    assert len(series) <= 12, series
    # Counts grow, digits at most; no new series of any metric beyond a handful.
    assert len(after) - len(before) < 2000, (len(before), len(after))
    new = {line.split(" ")[0] for line in after.splitlines()} - {line.split(" ")[0] for line in before.splitlines()}
    assert len(new) <= 12, sorted(new)
    assert log.count(" omni.access ") >= len(requests)  # every request still logged


def test_metrics_label_only_what_the_server_owns():
    from app.metrics import Metrics

    metrics = Metrics()
    metrics.observe_request("/v1/systemone", "english", 200, {"infer": 0.003}, 0.004)
    metrics.observe_request("/v1/systemone", "", 422, {}, 0.0005)
    metrics.observe_request("unmatched", "", 404, None)
    text = metrics.render().decode()
    assert 'omni_request_duration_seconds_bucket{code="200",le="0.005",model="english"} 1.0' in text
    assert 'omni_request_duration_seconds_count{code="422",model=""} 1.0' in text
    assert 'omni_requests_total{model="",route="unmatched",status="404"} 1.0' in text
    assert 'omni_request_duration_seconds_count{code="404"' not in text  # decisions only


# -- logs ------------------------------------------------------------------------------------


def test_the_log_format_is_text_or_json():
    from app.config import Settings

    assert Settings.from_env({}).log_format == "text"
    assert Settings.from_env({"OMNI_LOG_FORMAT": "json"}).log_format == "json"
    with pytest.raises(ValueError, match="OMNI_LOG_FORMAT must be one of .*'xml'"):
        Settings.from_env({"OMNI_LOG_FORMAT": "xml"})


def _requests(server, fmt: str) -> dict[str, httpx.Response]:
    """A decision (with the caller's trace), a fault hit first here (a 500), an unknown path and a
    probe, each with the client's request id."""
    url = server.url
    ids = {name: "%s-%s" % (name, fmt) for name in ("ok", "boom", "lost", "probe")}
    return {
        "ok": httpx.post(
            url + "/v1/systemone",
            json=BODY,
            timeout=30,
            headers={"x-request-id": ids["ok"], "traceparent": TRACEPARENT},
        ),
        "boom": httpx.post(
            url + "/v1/systemone",
            json={**BODY, "model": FRESH_FAULT},
            timeout=30,
            headers={"x-request-id": ids["boom"]},
        ),
        "lost": httpx.get(url + "/v1/random-%d" % random.randint(0, 10**9), headers={"x-request-id": ids["lost"]}),
        "probe": httpx.get(url + "/livez", headers={"x-request-id": ids["probe"]}),
    }


def test_text_logs_carry_an_access_line_per_request_and_the_id_of_the_500(served):
    replies = _requests(served, "text")
    assert [r.status_code for r in replies.values()] == [200, 500, 404, 200]
    assert replies["boom"].json()["instance"] == "boom-text"
    log = wait_for(served, lambda t: "[probe-text]" in t)
    lines = log.splitlines()

    def access(rid: str) -> list[str]:
        return [line for line in lines if " INFO omni.access [%s]: " % rid in line]

    for rid, start in (
        ("ok-text", "POST /v1/systemone 200 "),
        ("boom-text", "POST /v1/systemone 500 "),
        ("lost-text", "GET unmatched 404 "),
        ("probe-text", "GET /livez 200 "),
    ):
        (line,) = access(rid)  # exactly one
        message = line.split("]: ", 1)[1]
        assert message.startswith(start), line
        assert re.search(r" \d+\.\d{3} ms model=\S+ trace_id=\S+$", message), line
    assert access("ok-text")[0].endswith("model=english trace_id=%s" % TRACE_ID)
    assert access("probe-text")[0].endswith("model=- trace_id=-")

    # What the client's id finds for the 500: the engine's warning, the error with its traceback,
    # the access line; and the id never leaks onto a line of another request.
    found = [line for line in lines if "[boom-text]" in line]
    assert any("WARNING omni.serving [boom-text]: about to fail on purpose" in line for line in found)
    (error,) = [line for line in found if " ERROR " in line]
    assert "unhandled error on POST /v1/systemone" in error
    after = lines[lines.index(error) + 1 :]
    assert after[0] == "  Traceback (most recent call last):"
    assert any("RuntimeError: injected fault" in line for line in after[:40])
    assert all(line.startswith("  ") for line in after[: after.index("  RuntimeError: injected fault")])
    assert len(found) == 3


def test_a_client_cannot_forge_a_text_log_line(served):
    """Text a client sends that reaches a log message (here the fault's warning quotes the state)
    is written escaped: one record, one line."""
    forged = "2030-01-01 00:00:00,000 ERROR omni [forged-id]: forged line"
    reply = httpx.post(
        served.url + "/v1/systemone",
        json={**BODY, "model": FAULT_MODEL, "state": "x\r\n" + forged},
        headers={"x-request-id": "forge"},
        timeout=30,
    )
    assert reply.status_code == 500
    lines = wait_for(served, lambda t: "omni.access [forge]" in t).splitlines()
    assert not any(line.startswith(forged) for line in lines)
    (warning,) = [line for line in lines if "[forge]: about to fail on purpose" in line]
    assert warning.endswith("about to fail on purpose: x\\x0d\\x0a" + forged)


def test_a_client_cannot_forge_a_line_through_a_traceback(served):
    """A bug whose exception quotes the client's text: its traceback keeps its own lines, each
    indented under the error record, so the quoted line stands inside it, not as a record."""
    forged = "2030-01-01 00:00:00,000 ERROR omni [forged-id]: forged line"
    reply = httpx.post(
        served.url + "/v1/systemone",
        json={**BODY, "model": "fault-quoting", "state": "x\r\n" + forged + "\x1b[2K"},
        headers={"x-request-id": "forge-tb"},
        timeout=30,
    )
    assert reply.status_code == 500
    lines = wait_for(served, lambda t: "omni.access [forge-tb]" in t).splitlines()
    assert not any(line.startswith(forged) for line in lines)
    (error,) = [line for line in lines if "ERROR" in line and "[forge-tb]" in line]
    tail = lines[lines.index(error) + 1 :]
    end = tail.index(next(line for line in tail if "[forge-tb]" in line))  # the access line
    assert tail[0] == "  Traceback (most recent call last):"
    assert all(line.startswith("  ") for line in tail[:end])
    assert "  " + forged + "\\x1b[2K" in tail[:end]  # quoted, indented, escaped


def test_json_logs_are_one_object_a_line(english, tmp_path):
    """As JSON, Granian's own lines included (app/granian_log_json.json, which `make serve`
    passes), under Granian's ASGI interface (the text test serves through RSGI)."""
    env = {"OMNI_MODELS": english[1], "OMNI_LOG_FORMAT": "json", "GRANIAN_LOG_CONFIG": GRANIAN_JSON_LOG}
    with run_server(tmp_path, env, target=FAULTY, interface="asgi") as s:
        replies = _requests(s, "json")
        log = wait_for(s, lambda t: '"probe-json"' in t)
    assert [r.status_code for r in replies.values()] == [200, 500, 404, 200]
    records = [json.loads(line) for line in log.splitlines()]  # every line
    assert len(records) > 10 and all({"time", "level", "logger", "message"} <= r.keys() for r in records)
    assert any(r["logger"] == "_granian" and r["message"].startswith("Starting granian") for r in records)
    assert any(r["message"].startswith("model english ready on cpu") for r in records)

    def of(rid: str) -> list[dict]:
        return [r for r in records if r.get("request_id") == rid]

    (ok,) = [r for r in of("ok-json") if r["logger"] == "omni.access"]
    assert ok["method"] == "POST" and ok["route"] == "/v1/systemone" and ok["model"] == "english"
    assert ok["status"] == 200 and ok["trace_id"] == TRACE_ID and 0 < ok["duration_ms"] < 30000
    (lost,) = of("lost-json")
    assert (lost["route"], lost["status"], lost["model"], lost["trace_id"]) == ("unmatched", 404, None, None)
    boom = of("boom-json")
    assert [r["level"] for r in boom] == ["WARNING", "ERROR", "INFO"]
    assert "RuntimeError: injected fault" in boom[1]["exception"] and boom[2]["status"] == 500
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", ok["time"])


# -- dashboard -------------------------------------------------------------------------------


def _metric_names(expr: str) -> set[str]:
    names = set(re.findall(r"\b((?:omni|process|python)_[a-z_]+)", expr))
    return {re.sub(r"_(bucket|sum|count|total)$", "", n) for n in names}


def test_the_dashboard_reads_what_the_server_exports(served):
    with open(DASHBOARD) as f:
        dash = json.load(f)
    (variable,) = dash["templating"]["list"]
    assert variable["name"] == "model" and "omni_model_ready" in variable["query"]["query"]
    assert variable["includeAll"] and variable["allValue"] == ".*"

    httpx.post(served.url + "/v1/systemone", json=BODY, timeout=30)
    exported = set(scrape(served))
    panels = {p["title"]: [t["expr"] for t in p["targets"]] for p in dash["panels"]}
    for title, exprs in panels.items():
        for expr in exprs:
            assert _metric_names(expr) <= exported, (title, expr, _metric_names(expr) - exported)
            # every metric labelled by model follows the variable
            if re.search(r"omni_(request|batch|input|decisions|model_ready|executor)", expr):
                assert 'model=~"$model"' in expr, (title, expr)

    def panel(words: str) -> list[str]:
        (found,) = [exprs for title, exprs in panels.items() if words in title.lower()]
        return found

    assert all("omni_request_duration_seconds_bucket" in e for e in panel("end-to-end latency"))
    assert any('code=~"5.."' in e for e in panel("error rate"))
    assert panel("queue depth") == ["max(omni_queue_depth)"]
    assert any("omni_batch_requests" in e for e in panel("batch size"))
    assert any("process_resident_memory_bytes" in e for e in panel("memory"))
