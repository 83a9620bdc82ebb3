"""The container image, built and run for real (issue 8): a private dockerd (Debian's docker.io),
a Debian bookworm base image made here with debootstrap (no image registry is reachable), the
CPU variant built with Compose v2, `docker compose up --wait` with the demo checkpoint, then a
decision, /readyz, a trace at the collector, a clean stop, and `down` with everything removed.

See docs/deployment.md ("The image test") and compose.test.yaml for what stands in for what.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import httpx
import pytest

import app
from models.laya.served import WARMUP_REQUEST
from tests.conftest import ROOT, free_port
from tests.deploy import tools
from tests.deploy.engine import private_engine
from tests.deploy.stack import Stack

pytestmark = [pytest.mark.slow, pytest.mark.image]

BASE_IMAGE = "omni-ci-base:bookworm"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = "00-%s-00f067aa0ba902b7-01" % TRACE_ID  # sampled: parent-based sampling keeps it


def _step(timings: dict, name: str, t0: float) -> float:
    now = time.monotonic()
    timings[name] = round(now - t0, 1)
    print("image test: %-28s %6.1f s" % (name, now - t0), file=sys.stderr, flush=True)
    return now


@pytest.fixture
def engine(compose_bin):
    tools.ensure_engine_packages()
    with private_engine() as e:
        yield e


@pytest.fixture
def demo_dir():
    """Where the demo checkpoint is built and exported on the host; readable by the image's
    user (uid 10001), which copies it into the models volume."""
    d = tempfile.mkdtemp(prefix="omni-demo-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.timeout(1500)
def test_image_builds_and_serves_with_compose(compose_bin, engine, demo_dir):
    timings: dict = {}
    t = t_start = time.monotonic()
    # The demo checkpoint (torch, on the host) builds while the engine builds the image.
    demo_log = os.path.join(engine.root, "demo.log")
    with open(demo_log, "w") as log:
        demo = subprocess.Popen(
            [sys.executable, "-m", "models.demo", demo_dir], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT
        )
    port = free_port()
    # Only the compose files' defaults and this test's values: nothing from the caller's shell.
    env = {
        k: v
        for k, v in engine.env().items()
        if not k.startswith(("OMNI_", "OTEL_", "COMPOSE_FILE", "COMPOSE_PROJECT", "COMPOSE_PROFILES"))
        and k not in ("PORT", "GRAFANA_PORT", "ORT_EXTRA", "HF_TOKEN")
    }
    env.update(OMNI_BASE_IMAGE=BASE_IMAGE, OMNI_TEST_DEMO=demo_dir, PORT=str(port))
    stack = Stack(compose_bin, "omni-image-test-%d" % os.getpid(), env)
    try:
        tools.make_base_image(BASE_IMAGE, env)
        t = _step(timings, "base image", t)

        # Every published port of the stack under test is bound to 127.0.0.1.
        config = stack.config()
        ports = [p for s in config["services"].values() for p in s.get("ports", [])]
        assert ports and all(p["host_ip"] == "127.0.0.1" for p in ports), ports

        # Built as `make release` builds (deploy/release.sh): labelled with the version and commit.
        revision = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        revision = revision or "0" * 40  # a checkout without git history
        stack.run(
            "build",
            "--build-arg",
            "VERSION=" + app.__version__,
            "--build-arg",
            "REVISION=" + revision,
            "server",
            timeout=900,
        )
        t = _step(timings, "build (CPU runtime)", t)
        labels = json.loads(
            subprocess.run(
                [
                    "docker",
                    "image",
                    "inspect",
                    "--format",
                    "{{json .Config.Labels}}",
                    config["services"]["server"]["image"],
                ],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        assert labels["org.opencontainers.image.version"] == app.__version__, labels
        assert labels["org.opencontainers.image.revision"] == revision, labels
        if demo.wait(timeout=600) != 0:
            with open(demo_log) as f:
                raise AssertionError("the demo checkpoint did not build:\n" + f.read()[-4000:])
        t = _step(timings, "demo export (waited)", t)

        stack.run("up", "--detach", "--wait", "--wait-timeout", "240", "--no-build", "server", timeout=300)
        t = _step(timings, "up --wait", t)
        assert stack.run("port", "server", "8000").stdout.strip() == "127.0.0.1:%d" % port
        # The one-shot export ran as the image's user (uid 10001) and could write the fresh
        # models volume (the image creates /models owned by that user), then exited 0.
        exported = stack.containers("export")
        assert exported and exported[0]["ExitCode"] == 0, stack.logs("export")
        assert stack.run("exec", "-T", "server", "id", "-u").stdout.strip() == "10001"
        # The runtime image holds the served modules of models/ and no exporter (nor torch).
        held = stack.run(
            "exec",
            "-T",
            "server",
            "python3",
            "-c",
            "import importlib.util as u; print([m for m in ('models.laya.served', "
            "'models.qwen35.rows', 'models.laya.export', 'models.export', 'models.qwen35.gate', "
            "'torch') if u.find_spec(m) is not None])",
        ).stdout.strip()
        assert held == "['models.laya.served', 'models.qwen35.rows']", held

        url = "http://127.0.0.1:%d" % port
        assert httpx.get(url + "/readyz", timeout=10).status_code == 200
        models = httpx.get(url + "/v1/models", timeout=10).json()["models"]
        assert [m["name"] for m in models] == ["english"] and models[0]["random_weights"] is True
        r = httpx.post(
            url + "/v1/systemone",
            json={"model": models[0]["name"], **WARMUP_REQUEST},
            headers={"traceparent": TRACEPARENT},
            timeout=30,
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert list(body["answers"]) == list(WARMUP_REQUEST["questions"])
        assert body["answers"]["department"]["choice"] in WARMUP_REQUEST["questions"]["department"]["criteria"]
        assert body["served_by"]["device"] == "cpu", body["served_by"]

        # The request's spans reach the collector (the stand-in logs one JSON line per span).
        deadline, names = time.monotonic() + 30, set()
        while time.monotonic() < deadline and "POST /v1/systemone" not in names:
            time.sleep(0.5)
            lines = stack.run("logs", "--no-log-prefix", "otel-collector").stdout.splitlines()
            spans = [json.loads(line) for line in lines if line.startswith("{")]
            names = {s["name"] for s in spans if s["trace_id"] == TRACE_ID and s["service"] == "system1-omni"}
        assert {"POST /v1/systemone", "execute"} <= names, stack.logs()
        t = _step(timings, "decision, readyz, trace", t)

        # SIGTERM (compose stop): the server drains and exits 0 well inside its grace period.
        stack.run("stop", "server", timeout=120)
        stopped = stack.containers("server")
        assert stopped and stopped[0]["ExitCode"] == 0, stack.logs("server")
        t = _step(timings, "stop", t)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        down = stack.run("down", "--volumes", "--rmi", "all", "--remove-orphans", timeout=300, check=False)
        subprocess.run(["docker", "image", "rm", "--force", BASE_IMAGE], env=env, capture_output=True)
        leftovers = {
            what: subprocess.run(
                ["docker", what, "ls", "--all", "--quiet"] if what != "volume" else ["docker", what, "ls", "--quiet"],
                env=env,
                capture_output=True,
                text=True,
            ).stdout.split()
            for what in ("container", "image", "volume")
        }
        _step(timings, "down, images removed", t)
        print("image test: total %.1f s %s" % (time.monotonic() - t_start, timings), file=sys.stderr, flush=True)
    assert down.returncode == 0, down.stderr
    assert leftovers == {"container": [], "image": [], "volume": []}, leftovers
