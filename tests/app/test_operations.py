"""What operators rely on, against real Granian processes: a configuration the server cannot
start with stops it with one line naming the setting; `/livez` fails once a model has failed;
the default model; `OMNI_MODELS` entries in the export service's `name=source` syntax."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
import pytest

from app.launch import event_loop
from models.laya.served import WARMUP_REQUEST
from tests.conftest import ROOT, free_port, run_server


def export_copy(export_dir: str, dest, name: str, *, corrupt: bool = False) -> str:
    """`export_dir` served under another name (its manifest's `name`, no aliases), its files
    linked; `corrupt`: its ONNX graph replaced by bytes ONNX Runtime cannot parse."""
    dest = str(dest)
    os.makedirs(dest)
    for entry in os.listdir(export_dir):
        if entry != "manifest.json" and not (corrupt and entry == "model.onnx"):
            os.symlink(os.path.join(export_dir, entry), os.path.join(dest, entry))
    with open(os.path.join(export_dir, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    manifest.update(name=name, aliases=[])
    with open(os.path.join(dest, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f)
    if corrupt:
        with open(os.path.join(dest, "model.onnx"), "wb") as f:
            f.write(b"this is not an ONNX graph" * 64)
    return dest


def start_fails(tmp_path, env: dict, timeout: float = 60.0) -> tuple[int, str]:
    """Start the server as served; it must exit by itself: (exit status, its output)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("OMNI_")}
    full_env.update(env, PYTHONUNBUFFERED="1")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "granian",
            "--interface",
            "rsgi",
            "--workers",
            "1",
            "--loop",
            event_loop(full_env),
            "--host",
            "127.0.0.1",
            "--port",
            str(free_port()),
            "app.main:app",
        ],
        cwd=ROOT,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=timeout,
        text=True,
    )
    return proc.returncode, proc.stdout


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if " ERROR omni: " in line]


# -- settings the server cannot start with ---------------------------------------------------


def test_a_typo_in_an_omni_variable_stops_the_server_with_its_name(english, tmp_path):
    code, out = start_fails(tmp_path, {"OMNI_MODELS": english[1], "OMNI_QEUE_SIZE": "8"})
    assert code != 0
    (line,) = error_lines(out)
    assert "unknown variable OMNI_QEUE_SIZE (did you mean OMNI_QUEUE_SIZE?)" in line
    assert "Traceback" not in out


def test_a_bad_value_stops_the_server_naming_the_variable(english, tmp_path):
    code, out = start_fails(tmp_path, {"OMNI_MODELS": english[1], "OMNI_REQUEST_TIMEOUT_S": "soon"})
    assert code != 0
    (line,) = error_lines(out)
    assert line.endswith("invalid configuration: OMNI_REQUEST_TIMEOUT_S must be a number, got 'soon'")
    assert "Traceback" not in out and "invalid literal" not in out


def test_an_unknown_key_in_the_config_file_stops_the_server(english, tmp_path):
    config = tmp_path / "omni.toml"
    config.write_text('models = ["%s"]\nqueue_sise = 8\n' % english[1])
    code, out = start_fails(tmp_path, {"OMNI_CONFIG": str(config)})
    assert code != 0
    (line,) = error_lines(out)
    assert "unknown key in OMNI_CONFIG=%s: queue_sise (did you mean queue_size?)" % config in line


def test_a_default_model_that_is_not_loaded_stops_the_server(english, tmp_path):
    code, out = start_fails(tmp_path, {"OMNI_MODELS": english[1], "OMNI_DEFAULT_MODEL": "multilingual"})
    assert code != 0
    (line,) = error_lines(out)
    assert "OMNI_DEFAULT_MODEL=multilingual names no loaded model (loaded: english)" in line


# -- liveness ----------------------------------------------------------------------------------


def test_livez_fails_once_a_session_cannot_be_created(english, tmp_path):
    """A model whose ONNX file is corrupt: its session creation fails for real, the model is
    `failed` and rebuilt with backoff; once its rebuilds have failed too, /livez answers 503 naming
    it and why (a new process is what is left), while the healthy model answers throughout."""
    root = tmp_path / "models"
    export_copy(english[1], root / "english", "english")
    export_copy(english[1], root / "broken", "broken", corrupt=True)
    env = {"OMNI_MODEL_ROOT": str(root), "OMNI_MODELS": "english,broken"}
    with run_server(tmp_path, env, wait_ready=False) as s:
        deadline = time.monotonic() + 60
        while (live := httpx.get(s.url + "/livez")).status_code == 200:
            assert time.monotonic() < deadline, "the broken model never failed"
            time.sleep(0.1)
        assert live.status_code == 503
        assert live.headers["content-type"].startswith("application/problem+json")
        body = live.json()
        assert body["code"] == "not_live" and body["status"] == 503
        assert body["detail"].startswith("model broken is out of service after 3 rebuilds: session creation failed: ")
        assert body["instance"] == live.headers["x-request-id"] and live.headers["retry-after"] == "1"
        (failed,) = body["models"]
        assert failed["name"] == "broken" and failed["state"] == "failed"
        assert failed["error"].startswith("session creation failed: ") and failed["rebuilds"] == 3
        ready = httpx.get(s.url + "/readyz")
        assert ready.status_code == 503 and int(ready.headers["retry-after"]) >= 1
        while httpx.get(s.url + "/health").json()["models"]["english"]["state"] != "ready":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        ok = httpx.post(s.url + "/v1/systemone", json={"model": "english", **WARMUP_REQUEST}, timeout=30)
        assert ok.status_code == 200
        # Strict readiness for the replica; per model for a balancer that routes by model.
        assert httpx.get(s.url + "/readyz").status_code == 503
        assert httpx.get(s.url + "/readyz", params={"model": "english"}).status_code == 200
        one = httpx.get(s.url + "/readyz", params={"model": "broken"})
        assert one.status_code == 503 and [m["name"] for m in one.json()["models"]] == ["broken"]
        assert httpx.get(s.url + "/readyz", params={"model": "nope"}).status_code == 422
        assert "model broken failed to load" in s.log()


def test_a_zero_retry_after_is_refused(english, tmp_path):
    code, out = start_fails(tmp_path, {"OMNI_MODELS": english[1], "OMNI_RETRY_AFTER_S": "0"})
    assert code != 0
    (line,) = error_lines(out)
    assert "OMNI_RETRY_AFTER_S must be a positive number, got 0" in line


# -- the default model and export entries ------------------------------------------------------


@pytest.fixture(scope="module")
def two_models(english, tmp_path_factory):
    """english and a second model, named in OMNI_MODELS as the export service names them."""
    tmp = tmp_path_factory.mktemp("two")
    root = tmp / "models"
    export_copy(english[1], root / "english", "english")
    export_copy(english[1], root / "second", "second")
    env = {
        "OMNI_MODEL_ROOT": str(root),
        "OMNI_MODELS": "english=demo,second=laya:convaiinnovations/laya",
        "OMNI_DEFAULT_MODEL": "second",
    }
    with run_server(tmp, env) as s:
        yield s


def ask(server, **fields):
    body = {k: v for k, v in WARMUP_REQUEST.items()}
    body.update(fields)
    r = httpx.post(server.url + "/v1/systemone", json=body, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def test_export_entries_serve_the_directories_they_name(two_models):
    names = [m["name"] for m in httpx.get(two_models.url + "/v1/models").json()["models"]]
    assert names == ["english", "second"]


def test_a_request_without_model_gets_the_default_model(two_models):
    assert ask(two_models)["model"] == "second"
    assert ask(two_models, model=None)["model"] == "second"
    assert ask(two_models, model="jev-latest")["model"] == "second"
    assert ask(two_models, model="english")["model"] == "english"
    listed = {m["name"]: m["aliases"] for m in httpx.get(two_models.url + "/v1/models").json()["models"]}
    assert "jev-latest" in listed["second"] and "jev-latest" not in listed["english"]
