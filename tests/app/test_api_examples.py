"""The client examples of docs/api.md ("Clients"), extracted and run as written against a real
server with a key: the official Jev SDK in the `jev` profile, and plain httpx, whose retry on a
503 is driven against a server that is still warming up."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT, run_server

KEY = "examples-key"


def examples() -> list[str]:
    with open(os.path.join(ROOT, "docs", "api.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("\n## Clients\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def run_example(code: str, server) -> str:
    env = {**os.environ, "OMNI_URL": server.url, "OMNI_API_KEY": KEY}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_examples_run_as_written(english, tmp_path):
    sdk, plain = examples()
    assert "TypeSafeClient" in sdk and "httpx" in plain
    with run_server(tmp_path, {"OMNI_MODELS": english[1], "OMNI_API_KEY": KEY}) as server:
        out = run_example(sdk, server)
        assert re.search(r"^department: (billing|technical) confidence [0-9.]+$", out, re.MULTILINE), out
        assert re.search(r"^urgency: [0-9.]+ refund: [0-9.]+$", out, re.MULTILINE), out
        assert re.fullmatch(r"refund: [0-9.]+\n", run_example(plain, server))


def not_ready_answers(server) -> float:
    for family in text_string_to_metric_families(httpx.get(server.url + "/metrics").text):
        if family.name == "omni_errors":
            return sum(
                s.value for s in family.samples if s.labels.get("code") == "not_ready" and s.name.endswith("_total")
            )
    return 0.0


def test_the_httpx_example_retries_a_503_after_retry_after(english, tmp_path):
    _, plain = examples()
    definitions = plain.split("\nanswer = ", 1)[0]  # the example's function, not its call
    env = {"OMNI_MODELS": english[1], "OMNI_API_KEY": KEY, "OMNI_WARMUP_REQUESTS": "400"}
    with run_server(tmp_path, env, wait_ready=False) as server:
        os.environ["OMNI_URL"], os.environ["OMNI_API_KEY"] = server.url, KEY
        try:
            namespace: dict = {}
            exec(compile(definitions, "docs/api.md", "exec"), namespace)
        finally:
            del os.environ["OMNI_URL"], os.environ["OMNI_API_KEY"]
        assert httpx.get(server.url + "/readyz").status_code == 503  # still warming up
        started = time.monotonic()
        body = {"state": "Refund me.", "questions": {"r": {"type": "noul", "instructions": "Refund?"}}}
        answer = namespace["decide"](body, attempts=90)
        assert 0.0 <= answer["answers"]["r"]["noul"] <= 1.0
        refused = not_ready_answers(server)
        assert refused >= 1  # it was refused, then retried
        assert time.monotonic() - started >= refused * 0.9  # each time after the 1 s Retry-After
