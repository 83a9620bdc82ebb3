"""Container files: hadolint-clean Dockerfile; the compose stack wired as documented."""
from __future__ import annotations

import os
import shutil
import subprocess

import yaml

from tests.conftest import ROOT


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_multi_constructor("!", lambda loader, tag, node: {"tag": tag})   # Compose's !reset


def _compose(name):
    with open(os.path.join(ROOT, name)) as f:
        return yaml.load(f, Loader=_Loader)


def test_dockerfile_is_hadolint_clean():
    hadolint = shutil.which("hadolint") or os.path.join(os.path.dirname(os.sys.executable), "hadolint")
    proc = subprocess.run([hadolint, os.path.join(ROOT, "Dockerfile")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_compose_stack():
    c = _compose("compose.yaml")
    assert {"export", "server", "otel-collector", "tempo", "prometheus", "grafana"} <= set(c["services"])
    server = c["services"]["server"]
    assert server["depends_on"]["export"]["condition"] == "service_completed_successfully"
    assert "models:/models:ro" in server["volumes"]
    assert all(p.startswith("127.0.0.1:") for s in c["services"].values() for p in s.get("ports", []))
    assert "/readyz" in " ".join(server["healthcheck"]["test"])
    assert int(server["stop_grace_period"].rstrip("s")) > 30
    assert server["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    assert server["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"].startswith("http://otel-collector:")
    assert c["services"]["export"]["environment"]["OMNI_MODELS"] == server["environment"]["OMNI_MODELS"]
    cpu = _compose("compose.cpu.yaml")["services"]
    assert cpu["server"]["deploy"] == {"tag": "reset"} and cpu["server"]["build"]["args"]["ORT_EXTRA"] == "cpu"
    for path in ("deploy/otel/collector.yaml", "deploy/tempo.yaml", "deploy/grafana/dashboards/system1-omni.json",
                 "deploy/grafana/provisioning/dashboards/omni.yaml", "deploy/export.sh"):
        assert os.path.exists(os.path.join(ROOT, path)), path


def test_compose_file_validates_with_docker_compose_when_present():
    exe = shutil.which("docker-compose")
    if exe is None:
        import pytest

        pytest.skip("docker-compose is not installed here")
    proc = subprocess.run([exe, "-f", "compose.yaml", "config", "-q"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_export_script_knows_the_published_names(tmp_path):
    """The export entrypoint maps names to checkpoints and refuses unknown names before work."""
    env = {**os.environ, "OMNI_MODELS": "nonexistent", "OMNI_MODEL_ROOT": str(tmp_path)}
    proc = subprocess.run(["sh", os.path.join(ROOT, "deploy", "export.sh")], env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and "no published checkpoint is named nonexistent" in proc.stderr
