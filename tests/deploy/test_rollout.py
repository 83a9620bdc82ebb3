"""docs/deployment.md's procedures on the CPU stack, run as written against a private Docker
engine (tests/deploy/engine.py):

- upgrade and rollback: the commands are read from the document's own block and run one by one
  in bash. The real export image exports and publishes the demo checkpoint, the runtime image
  serves it, the upgrade builds and runs images of another version, the rollback runs the first
  ones again;
- a release: `make release STACKS=cpu REGISTRY=...` on a clone of the commit, pushing to a
  Distribution registry on loopback (Debian's docker-registry); the kustomize `images:` lines it
  prints pin, in an overlay of overlays/cpu, every container to the pushed digests.

`docker compose` is the pinned Compose v2 as a CLI plugin, wrapped to add one file after the CPU
stack's, tests/deploy/compose.rollout.yaml: CI reaches no image registry, so the images build from
a local base image and take torch's CPU wheel from the wheelhouse."""

from __future__ import annotations

import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import time

import httpx
import pytest
import yaml

from tests.conftest import ROOT, free_port
from tests.deploy import tools
from tests.deploy.test_kubernetes import kustomize

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
# The Compose plugin the engine's CLI runs: the pinned binary, the stand-ins after compose.cpu.yaml.
PLUGIN = """#!/usr/bin/env bash
args=()
for a in "$@"; do args+=("$a"); [ "$a" = compose.cpu.yaml ] && args+=(-f %s); done
exec %s "${args[@]}"
"""


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


def _until(check, what: str, timeout: float = 300) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if check():
                return
        except (httpx.HTTPError, OSError):
            pass
        time.sleep(1)
    raise AssertionError("%s not within %d s" % (what, timeout))


def _ready(url: str) -> None:
    _until(lambda: httpx.get(url + "/readyz", timeout=5).status_code == 200, "the server ready")


def _current(listing: str) -> str:
    found = re.search(r"current -> (\S+)", listing)
    assert found, listing
    return os.path.basename(found.group(1).rstrip("/"))


def _bash(command: str, env: dict, cwd: str = ROOT, timeout: float = 1800) -> str:
    t0 = time.monotonic()
    proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    out = proc.stdout + proc.stderr
    print("rollout test: %6.1f s  %s" % (time.monotonic() - t0, command[-90:]), file=sys.stderr, flush=True)
    assert proc.returncode == 0, "%s failed (%d):\n%s" % (command, proc.returncode, out[-6000:])
    return out


@pytest.fixture
def engine_env(compose_bin, tmp_path):
    """The private engine's environment: its socket, the wrapped Compose plugin, a local base
    image, torch's wheel in the wheelhouse; nothing of the caller's OMNI_ or compose settings."""
    wheel = _torch_wheel()
    tools.ensure_engine_packages()
    from tests.deploy.engine import private_engine

    config = tmp_path / "docker-config"
    (config / "cli-plugins").mkdir(parents=True)
    plugin = config / "cli-plugins" / "docker-compose"
    plugin.write_text(PLUGIN % (STAND_INS, compose_bin))
    plugin.chmod(0o755)
    placed = os.path.join(ROOT, "wheelhouse", os.path.basename(wheel))
    placed_here = not os.path.exists(placed)
    with private_engine() as engine:
        env = {
            k: v
            for k, v in engine.env().items()
            if not k.startswith(("OMNI_", "OTEL_", "COMPOSE_", "DOCKER_CONFIG"))
            and k not in ("PORT", "ORT_EXTRA", "HF_TOKEN", "REGISTRY", "STACKS")
        }
        env.update(DOCKER_CONFIG=str(config), OMNI_BASE_IMAGE=BASE_IMAGE, PORT=str(free_port()))
        try:
            if placed_here:
                shutil.copy(wheel, placed)
            tools.make_base_image(BASE_IMAGE, env)
            yield env, wheel
        finally:
            if placed_here and os.path.exists(placed):
                os.remove(placed)


@pytest.mark.slow
@pytest.mark.image
@pytest.mark.timeout(2400)
def test_upgrade_rollback_and_release_run_as_written(engine_env, kubectl, tmp_path):
    env, wheel = engine_env
    env = {**env, "COMPOSE_PROJECT_NAME": "omni-rollout-%d" % os.getpid()}
    url = "http://127.0.0.1:%s" % env["PORT"]
    c, steps = procedure()[0], procedure()[1:]

    def step(i: int) -> str:
        return _bash("set -e; %s; %s" % (c, steps[i]), env)

    def served_image() -> str:
        return _bash(c + '; $c ps --format "{{.Image}}" server', env).strip()

    try:
        step(0)  # up: the export publishes, the server serves it
        _ready(url)
        assert served_image() == "system1-omni:0.1.0-cpu"
        first = _current(step(1))
        assert "published already" in step(2)  # the export again: nothing exported
        step(3)  # upgrade: images of another version
        _ready(url)
        assert served_image() == "system1-omni:0.1.1-cpu"
        assert _current(step(4)) == first  # the same exporter and options: the same version
        step(5)  # rollback: the first images again
        _ready(url)
        assert served_image() == "system1-omni:0.1.0-cpu"
        question = {"refund": {"type": "noul", "instructions": "Refund asked?"}}
        answer = httpx.post(
            url + "/v1/systemone",
            json={"model": "english", "state": "charged twice", "questions": question},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
    finally:
        subprocess.run(
            ["bash", "-c", c + "; $c down --volumes --remove-orphans"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            timeout=300,
        )
    _release(env, wheel, kubectl, tmp_path)


def _balancer_image() -> str:
    """The image the balancer component runs (components/balancer/balancer.yaml)."""
    path = os.path.join(ROOT, "deploy", "kubernetes", "components", "balancer", "balancer.yaml")
    with open(path, encoding="utf-8") as f:
        found = re.findall(r"^ *image: *(\S+)", f.read(), re.M)
    assert len(found) == 1, found
    return found[0]


def _release(env: dict, wheel: str, kubectl: str, tmp_path) -> None:
    """`make release` of this commit, pushed to a registry on loopback; the printed lines pin an overlay."""
    port = free_port()
    storage = tmp_path / "registry"
    config = tmp_path / "registry.yml"
    config.write_text(
        "version: 0.1\nstorage: {filesystem: {rootdirectory: %s}}\nhttp: {addr: 127.0.0.1:%d}\n" % (storage, port)
    )
    with open(tmp_path / "registry.log", "w") as log:
        registry = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    clone = str(tmp_path / "clone")
    try:
        _until(lambda: socket.create_connection(("127.0.0.1", port), 1).close() is None, "the registry", 30)
        subprocess.run(["git", "clone", "-q", ROOT, clone], check=True, capture_output=True)
        shutil.copy(wheel, os.path.join(clone, "wheelhouse"))  # ignored: the checkout stays clean
        revision = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True
        ).stdout.strip()
        tag = "0.1.0-%s-cpu" % revision[:12]
        # The balancer's HAProxy is mirrored beside the release. The engine reaches no upstream
        # registry here, so it holds a stand-in under the balancer's tag, which the release
        # mirrors as the engine's copy.
        balancer_image = _balancer_image()
        _bash("docker tag %s %s" % (BASE_IMAGE, balancer_image), env)
        out = _bash("make release STACKS=cpu REGISTRY=127.0.0.1:%d/omni" % port, env, cwd=clone)
        assert "# %s: an overlay of overlays/cpu pins them with" % tag in out, out
        pins = re.findall(r"^  - (\{name: .*\})$", out, re.M)
        images = [yaml.safe_load(p) for p in pins]
        assert [i["name"] for i in images] == ["system1-omni", "system1-omni-export", "haproxy"], out
        for image in images:
            assert image["newName"] == "127.0.0.1:%d/omni/%s" % (port, image["name"])
            assert re.fullmatch(r"sha256:[0-9a-f]{64}", image["digest"]), image
            _bash("docker pull -q %s@%s" % (image["newName"], image["digest"]), env)  # the registry has it
            if image["name"] == "haproxy":
                continue
            labels = _bash("docker image inspect --format '{{json .Config.Labels}}' %s:%s" % (image["name"], tag), env)
            assert '"org.opencontainers.image.revision":"%s"' % revision in labels, labels
            assert '"org.opencontainers.image.version":"0.1.0"' in labels, labels
        # An overlay of overlays/cpu with the balancer and those lines: every container, the
        # balancer's too, runs a pushed digest.
        overlay = os.path.join(clone, "deploy", "kubernetes", "overlays", "release")
        os.makedirs(overlay)
        with open(os.path.join(overlay, "kustomization.yaml"), "w", encoding="utf-8") as f:
            f.write(
                "resources: [../cpu]\ncomponents: [../../components/balancer]\nimages:\n%s\n"
                % "\n".join("  - " + p for p in pins)
            )
        rendered = kustomize(kubectl, overlay)
        used = {
            ctr["image"]
            for doc in rendered
            if doc and doc.get("kind") in ("Deployment", "Job")
            for spec in [doc["spec"]["template"]["spec"]]
            for ctr in spec.get("containers", []) + spec.get("initContainers", [])
        }
        assert used == {"%s@%s" % (i["newName"], i["digest"]) for i in images}, used
    finally:
        registry.terminate()
        registry.wait(timeout=30)
