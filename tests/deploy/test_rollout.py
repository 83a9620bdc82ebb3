"""docs/deployment.md's upgrade and rollback procedure on the CPU stack, run as written: the
commands are read from the document's own block and run one by one in bash against a private
Docker engine (tests/deploy/engine.py), `docker compose` being the pinned Compose v2 as a CLI
plugin. The one change: `c` names a third compose file, tests/deploy/compose.rollout.yaml, which
builds from a local base image and takes torch's CPU wheel from the wheelhouse, since CI reaches
no image registry. The real export image exports and publishes the demo checkpoint; the runtime
image serves it; the upgrade builds and runs images of another version; the rollback runs the
first ones again."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
import time

import httpx
import pytest

from tests.conftest import ROOT, free_port
from tests.deploy import tools

BASE_IMAGE = "omni-ci-base:bookworm"
DOC = os.path.join(ROOT, "docs", "deployment.md")
STAND_INS = os.path.join("tests", "deploy", "compose.rollout.yaml")
# What the procedure must hold, in order (the test below runs the document's text, not these).
PROCEDURE = [
    'c="docker compose -f compose.yaml -f compose.cpu.yaml"',
    "$c up -d",
    "$c exec server ls -l /models/english",
    "$c run --rm export",
    "OMNI_VERSION=0.1.1 $c build && OMNI_VERSION=0.1.1 $c up -d",
    "$c exec server ls -l /models/english",
    "$c up -d",
]


def procedure() -> list[str]:
    """The commands of the document's upgrade-and-rollback block, comments stripped."""
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    block = text.split("**Upgrade and rollback, on the CPU stack.**", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    lines = (re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def test_the_document_holds_the_procedure_this_file_runs():
    assert procedure() == PROCEDURE


def _torch_wheel() -> str:
    """torch's CPU wheel that requirements/torch-cpu.txt pins, from pip's find-links."""
    with open(os.path.join(ROOT, "requirements", "torch-cpu.txt"), encoding="utf-8") as f:
        version = re.search(r"^torch==(\S+)", f.read(), re.M).group(1)
    for d in os.environ.get("PIP_FIND_LINKS", "").split():
        found = glob.glob(os.path.join(d, "torch-%s-cp311-*.whl" % version))
        if found:
            return found[0]
    pytest.skip("no torch %s wheel where PIP_FIND_LINKS points (the export image needs it)" % version)


def _ready(url: str, timeout: float = 300) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if httpx.get(url + "/readyz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise AssertionError("the server was not ready within %d s" % timeout)


def _current(listing: str) -> str:
    found = re.search(r"current -> (\S+)", listing)
    assert found, listing
    return os.path.basename(found.group(1).rstrip("/"))


@pytest.mark.slow
@pytest.mark.image
@pytest.mark.timeout(2400)
def test_upgrade_and_rollback_run_as_written(compose_bin):
    wheel = _torch_wheel()
    tools.ensure_engine_packages()
    from tests.deploy.engine import private_engine

    commands = procedure()
    assert commands[0] == PROCEDURE[0]
    commands[0] = commands[0][:-1] + ' -f %s"' % STAND_INS
    placed = os.path.join(ROOT, "wheelhouse", os.path.basename(wheel))
    placed_here = not os.path.exists(placed)
    config = tempfile.mkdtemp(prefix="omni-docker-config-")
    os.makedirs(os.path.join(config, "cli-plugins"))
    os.symlink(compose_bin, os.path.join(config, "cli-plugins", "docker-compose"))
    port = free_port()
    with private_engine() as engine:
        env = {
            k: v
            for k, v in engine.env().items()
            if not k.startswith(("OMNI_", "OTEL_", "COMPOSE_FILE", "COMPOSE_PROFILES"))
            and k not in ("PORT", "ORT_EXTRA", "HF_TOKEN")
        }
        env.update(
            DOCKER_CONFIG=config,
            COMPOSE_PROJECT_NAME="omni-rollout-%d" % os.getpid(),
            OMNI_BASE_IMAGE=BASE_IMAGE,
            PORT=str(port),
        )
        url = "http://127.0.0.1:%d" % port

        def step(i: int) -> str:
            proc = subprocess.run(
                ["bash", "-c", "set -e; %s; %s" % (commands[0], commands[i])],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=1800,
            )
            out = proc.stdout + proc.stderr
            assert proc.returncode == 0, "%s failed (%d):\n%s" % (commands[i], proc.returncode, out[-6000:])
            return out

        def served_image() -> str:
            return subprocess.run(
                ["bash", "-c", commands[0] + '; $c ps --format "{{.Image}}" server'],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()

        try:
            if placed_here:
                shutil.copy(wheel, placed)
            tools.make_base_image(BASE_IMAGE, env)
            step(1)  # up: the export publishes, the server serves it
            _ready(url)
            assert served_image() == "system1-omni:0.1.0-cpu"
            first = _current(step(2))
            assert "published already" in step(3)  # run again: nothing exported
            step(4)  # upgrade: images of another version
            _ready(url)
            assert served_image() == "system1-omni:0.1.1-cpu"
            # The same exporter and options: the same version, so `current` stays.
            assert _current(step(5)) == first
            step(6)  # rollback: the first images again
            _ready(url)
            assert served_image() == "system1-omni:0.1.0-cpu"
            answer = httpx.post(
                url + "/v1/systemone",
                json={
                    "model": "english",
                    "state": "I was charged twice",
                    "questions": {"refund": {"type": "noul", "instructions": "Refund asked?"}},
                },
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
        finally:
            subprocess.run(
                ["bash", "-c", commands[0] + "; $c down --volumes --rmi all --remove-orphans"],
                cwd=ROOT,
                env=env,
                capture_output=True,
                timeout=300,
            )
            subprocess.run(["docker", "image", "rm", "--force", BASE_IMAGE], env=env, capture_output=True)
            if placed_here and os.path.exists(placed):
                os.remove(placed)
            shutil.rmtree(config, ignore_errors=True)
