"""`docker compose config` (Compose v2, the version the docs ask for) accepts every compose
file and override in the repository, and every port they publish is on 127.0.0.1 only."""

from __future__ import annotations

import glob
import json
import os
import re
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


def dockerfile() -> str:
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        return f.read()


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
    # Clients reach the server, or under compose.gpus.yaml the balancer in front of the servers.
    assert any(name == ("balancer" if "compose.gpus.yaml" in files else "server") for name, _ in published)
    for name, port in published:
        assert port.get("host_ip") == "127.0.0.1", (name, port)


def _config(compose_bin, files, *args):
    cmd = [compose_bin, "--project-name", "validate"] + sum((["--file", f] for f in files), []) + list(args)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMNI_", "DOCKER_", "COMPOSE_"))}
    proc = subprocess.run(
        cmd + ["config", "--format", "json"], cwd=ROOT, env={**env, **ENV}, capture_output=True, text=True
    )
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
    # The CPU export image holds torch's CPU build, whose lock is for Python 3.11 (the Dockerfile's
    # TORCH build argument; its default is PyPI's CUDA wheels, which a CPU stack has no use for).
    args = cpu["export"]["build"]["args"]
    assert args["TORCH"] == "cpu" and "TORCH" not in gpu["export"]["build"]["args"]
    with open(os.path.join(ROOT, "requirements", "lock.py")) as f:
        python = re.search(r'^TORCH_CPU_PYTHON = "([\d.]+)"', f.read(), re.M).group(1)
    assert args["BASE_IMAGE"].startswith("python:%s-" % python), args
    assert args["TORCH_INDEX_URL"].startswith("https://download.pytorch.org/whl/cpu")
    assert re.search(r'^ARG TORCH=cuda$.*"requirements/torch-\$\{TORCH\}\.txt"', dockerfile(), re.M | re.S)


GPUS = (BASE, "compose.gpus.yaml")


@pytest.mark.parametrize("gpus", [1, 2, 8])
def test_one_server_per_gpu_behind_the_balancer(compose_bin, gpus):
    """compose.gpus.yaml: the profile gpus-N runs N servers, the i-th reserving GPU i by id (a
    `count` would give every one GPU 0), all on the read-only `models` volume the export fills
    once and answering to the name `server`; only the balancer publishes a port."""
    services = _config(compose_bin, GPUS, *(["--profile", "gpus-%d" % gpus] if gpus > 1 else []))
    servers = ["server"] + ["server-%d" % i for i in range(1, gpus)]
    assert set(services) == {"export", "balancer", *servers}
    for i, name in enumerate(servers):
        s = services[name]
        (device,) = s["deploy"]["resources"]["reservations"]["devices"]
        assert device == {"driver": "nvidia", "device_ids": [str(i)], "capabilities": ["gpu"]}, name
        assert not s.get("ports"), name
        assert [(v["source"], v["target"], v.get("read_only")) for v in s["volumes"]] == [("models", "/models", True)]
        assert s["depends_on"]["export"]["condition"] == "service_completed_successfully"
        assert s["image"] == services["server"]["image"] and s["environment"] == services["server"]["environment"]
        assert "/readyz" in " ".join(s["healthcheck"]["test"])
        if name != "server":  # the service name is its own alias
            assert "server" in s["networks"]["default"]["aliases"], name
    assert services["export"]["deploy"]["resources"]["reservations"]["devices"][0]["count"] == 1
    balancer = services["balancer"]
    assert [(p["host_ip"], p["target"]) for p in balancer["ports"]] == [("127.0.0.1", 8000)]
    (config,) = balancer["volumes"]
    assert config["source"] == os.path.join(ROOT, "deploy", "haproxy", "haproxy.cfg") and config["read_only"]


def test_the_balancer_fills_its_slots_from_the_servers_name():
    """HAProxy resolves `server` on Docker's DNS into as many slots as the largest profile has
    servers, and Prometheus scrapes its metrics where compose.gpus.yaml mounts the job."""
    import re

    import yaml

    with open(os.path.join(ROOT, "deploy", "haproxy", "haproxy.cfg")) as f:
        cfg = f.read()
    slots = int(re.search(r"^    server-template omni (\d+) server:8000 resolvers docker ", cfg, re.M).group(1))
    with open(os.path.join(ROOT, "compose.gpus.yaml")) as f:
        profiles = re.findall(r"gpus-(\d+)", f.read())
    assert slots == max(int(n) for n in profiles) == 8
    assert re.search(r"^    bind :8000$", cfg, re.M) and re.search(r"^    bind :8404$", cfg, re.M)
    with open(os.path.join(ROOT, "deploy", "prometheus", "prometheus.yml")) as f:
        assert yaml.safe_load(f)["scrape_config_files"] == ["/etc/prometheus/scrape.d/*.yml"]
    with open(os.path.join(ROOT, "deploy", "prometheus", "haproxy.yml")) as f:
        (job,) = yaml.safe_load(f)["scrape_configs"]
    assert job["static_configs"] == [{"targets": ["balancer:8404"]}]
    with open(os.path.join(ROOT, "deploy", "otel", "collector.yaml")) as f:
        (scrape,) = yaml.safe_load(f)["receivers"]["prometheus"]["config"]["scrape_configs"]
    assert scrape["dns_sd_configs"][0]["names"] == ["server"]  # every server, not one of them


def test_the_observability_profile_scrapes_the_balancer(compose_bin):
    services = _config(compose_bin, GPUS, "--profile", "gpus-2", "--profile", "observability")
    mounts = {v["target"]: v["source"] for v in services["prometheus"]["volumes"] if v["type"] == "bind"}
    assert mounts["/etc/prometheus/scrape.d/haproxy.yml"] == os.path.join(ROOT, "deploy", "prometheus", "haproxy.yml")
    assert mounts["/etc/prometheus/prometheus.yml"].endswith("deploy/prometheus/prometheus.yml")
