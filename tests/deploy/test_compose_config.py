"""`docker compose config` (Compose v2, the version the docs ask for) accepts every compose
file and override in the repository, and every port they publish is on 127.0.0.1 only."""
from __future__ import annotations

import glob
import json
import os
import subprocess

import pytest

from tests.conftest import ROOT

BASE = "compose.yaml"
OVERRIDES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "compose.*.yaml")))
TEST_OVERRIDE = os.path.join("tests", "deploy", "compose.test.yaml")
# Each stack a user (or the image test) can start: the base alone, the base with each override,
# and the image test's stack (base + CPU override + its own).
STACKS = [(BASE,)] + [(BASE, o) for o in OVERRIDES] + [(BASE, "compose.cpu.yaml", TEST_OVERRIDE)]
# compose.test.yaml requires these (`${VAR:?}`); any value validates.
ENV = {"OMNI_TEST_DEMO": "/nonexistent-demo", "OMNI_BASE_IMAGE": "debian-python:validate"}


def test_every_root_compose_file_is_covered():
    assert OVERRIDES, "compose.cpu.yaml at least"
    assert set(glob.glob(os.path.join(ROOT, "compose*.y*ml"))) == {os.path.join(ROOT, f) for f in (BASE, *OVERRIDES)}


@pytest.mark.parametrize("files", STACKS, ids=["+".join(os.path.basename(f) for f in s) for s in STACKS])
def test_compose_config_validates(compose_bin, files):
    cmd = [compose_bin, "--project-name", "validate"] + sum((["--file", f] for f in files), [])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMNI_", "DOCKER_", "COMPOSE_"))}
    env.update(ENV)
    proc = subprocess.run(cmd + ["config", "--format", "json"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "WARN" not in proc.stderr, proc.stderr
    services = json.loads(proc.stdout)["services"]
    published = [(name, p) for name, s in services.items() for p in s.get("ports", [])]
    assert any(name == "server" for name, _ in published)
    for name, port in published:
        assert port.get("host_ip") == "127.0.0.1", (name, port)


def _config(compose_bin, files, *args):
    cmd = [compose_bin, "--project-name", "validate"] + sum((["--file", f] for f in files), []) + list(args)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMNI_", "DOCKER_", "COMPOSE_"))}
    proc = subprocess.run(cmd + ["config", "--format", "json"], cwd=ROOT, env={**env, **ENV},
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["services"]


@pytest.mark.parametrize("files", [(BASE,), (BASE, "compose.cpu.yaml")], ids=["gpu", "cpu"])
def test_the_observability_stack_is_a_profile(compose_bin, files):
    """`up` alone runs the export and the server; the profile adds the collector and its stores."""
    assert set(_config(compose_bin, files)) == {"export", "server"}
    observed = _config(compose_bin, files, "--profile", "observability")
    assert set(observed) == {"export", "server", "otel-collector", "tempo", "prometheus", "grafana"}
    assert observed["server"]["depends_on"]["otel-collector"]["required"] is False


def test_the_cpu_stack_has_images_of_its_own(compose_bin):
    """The CPU override builds onnxruntime (CPU) images under tags of their own, so building it
    never replaces the GPU stack's images."""
    gpu, cpu = _config(compose_bin, (BASE,)), _config(compose_bin, (BASE, "compose.cpu.yaml"))
    for name in ("server", "export"):
        assert cpu[name]["image"] == gpu[name]["image"] + "-cpu", (name, cpu[name]["image"])
        assert cpu[name]["build"]["args"]["ORT_EXTRA"] == "cpu" and gpu[name]["build"]["args"]["ORT_EXTRA"] == "gpu"
