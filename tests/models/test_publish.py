"""Versioned exports published atomically (models/publish.py, `models.export --publish`): a server
loads the version `current` names, complete or not at all; an export killed midway leaves the old
version served; a complete one is served by new servers while old ones keep theirs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from models import manifest as manifests
from models import publish
from models.laya.served import WARMUP_REQUEST
from tests.conftest import ROOT, run_server

BODY = {"model": "english", **WARMUP_REQUEST}


def _export(checkpoint: str, directory: str, **popen) -> subprocess.Popen:
    argv = [sys.executable, "-m", "models.export", "laya", "--checkpoint", checkpoint, "--publish", directory]
    return subprocess.Popen(argv + ["--name", "english"], cwd=ROOT, **popen)


def _served(server) -> tuple[str, list]:
    """Which checkpoint a server names for `english`, and what it answers."""
    health = httpx.get(server.url + "/health", timeout=10).json()
    answer = httpx.post(server.url + "/v1/systemone", json=BODY, timeout=30)
    assert answer.status_code == 200, answer.text
    return health["models"]["english"]["checkpoint"], answer.json()["answers"]


def test_version_names_the_checkpoint_the_exporter_and_the_options(tmp_path):
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "model.safetensors").write_bytes(b"a")
    local = publish.source_identity(str(tmp_path / "ck"), None, None)
    assert local.startswith("local-")
    (tmp_path / "ck" / "model.safetensors").write_bytes(b"b")
    assert publish.source_identity(str(tmp_path / "ck"), None, None) != local  # content, not the path
    commit = "55cf4c4ebb4ebe31b2550e8bdf3bd21b99753851"
    assert publish.source_identity("convaiinnovations/laya", commit, None) == commit[:12]  # no Hub asked
    v = publish.version(commit[:12], {"dtype": "float16"})
    assert v.startswith("%s-x%s-" % (commit[:12], manifests.EXPORTER_VERSION))
    assert publish.version(commit[:12], {"dtype": "float32"}) != v


def test_prune_keeps_the_newest_and_never_the_current_one(tmp_path):
    for i, name in enumerate(["v1", "v2", "v3", "v4", "v5"]):
        (tmp_path / name).mkdir()
        (tmp_path / name / manifests.MANIFEST).write_text("{}")
        os.utime(tmp_path / name, (1000 + i, 1000 + i))
    publish.point(str(tmp_path), "v1")  # a rollback to the oldest
    assert manifests.resolve(str(tmp_path)) == str(tmp_path / "v1")
    assert sorted(publish.prune(str(tmp_path), keep=3)) == ["v2", "v3"]
    assert publish.published(str(tmp_path)) == ["v5", "v4", "v1"]


def test_a_plain_export_directory_is_served_as_it_is(english):
    assert manifests.resolve(english[1]) == english[1]


@pytest.mark.slow
def test_a_killed_export_leaves_the_old_version_served_and_a_complete_one_is_served_beside_it(tmp_path):
    from models.laya import random_checkpoint

    ck_a = random_checkpoint.build(str(tmp_path / "ck-a"), "english", "tiny", seed=7)
    ck_b = random_checkpoint.build(str(tmp_path / "ck-b"), "english", "tiny", seed=8)
    root = tmp_path / "models"
    directory = str(root / "english")
    assert _export(ck_a, directory, stderr=subprocess.DEVNULL).wait(timeout=300) == 0
    (version_a,) = publish.published(directory)
    env = {"OMNI_MODELS": "english", "OMNI_MODEL_ROOT": str(root)}

    with run_server(tmp_path, env) as old:
        served_a = _served(old)
        assert served_a[0] == "local:ck-a"

        # B's export, killed once it has begun writing its graph.
        proc = _export(ck_b, directory, stderr=subprocess.DEVNULL)
        try:
            while proc.poll() is None:
                partial = [n for n in os.listdir(directory) if n.startswith(publish.PARTIAL)]
                written = [
                    os.path.join(dp, f)
                    for n in partial
                    for dp, _, fs in os.walk(os.path.join(directory, n))
                    for f in fs
                ]
                if written:
                    proc.send_signal(signal.SIGKILL)
                    break
                time.sleep(0.01)
        finally:
            assert proc.wait(timeout=300) == -signal.SIGKILL, "the export was killed while writing"
        assert publish.current(directory) == version_a and publish.published(directory) == [version_a]
        assert _served(old) == served_a
        with run_server(tmp_path, env) as new:
            assert _served(new) == served_a

        # B's export, complete: new servers load it, the old one still serves A.
        assert _export(ck_b, directory, stderr=subprocess.DEVNULL).wait(timeout=300) == 0
        version_b = publish.current(directory)
        assert version_b != version_a and set(publish.published(directory)) == {version_a, version_b}
        assert not [n for n in os.listdir(directory) if n.startswith(publish.PARTIAL)], "the killed one is gone"
        with run_server(tmp_path, env) as new:
            served_b = _served(new)
            assert served_b[0] == "local:ck-b" and served_b[1] != served_a[1]
            assert _served(old) == served_a

    # A rollback: A's export again is no export, only `current` moved back.
    log = subprocess.run(
        [
            sys.executable,
            "-m",
            "models.export",
            "laya",
            "--checkpoint",
            ck_a,
            "--publish",
            directory,
            "--name",
            "english",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert log.returncode == 0 and "published already" in log.stderr and "exported" not in log.stderr
    assert publish.current(directory) == version_a


def test_an_export_past_the_memory_limit_is_refused_before_anything_is_written(english, tmp_path):
    """A tiny checkpoint against a simulated small server: the exporter names both sizes, exits 4,
    and the directory keeps what it served (here nothing: no version, no `current`)."""
    directory = tmp_path / "english"
    argv = [sys.executable, "-m", "models.export", "laya", "--checkpoint", english[0], "--publish", str(directory)]
    proc = subprocess.run(argv + ["--memory-limit", "64Ki"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 4, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("error: the float32 export of english needs about ") and "past the memory limit of" in line
    assert "nothing written" in line and "Traceback" not in proc.stderr
    assert publish.published(str(directory)) == [] and publish.current(str(directory)) is None
    assert [n for n in os.listdir(directory) if n != publish.LOCK] == [], "no partial export left"


def test_the_servers_memory_is_the_smaller_of_the_limit_given_and_the_gpus(monkeypatch):
    from models import export

    assert export.gpu_memory() is None  # this machine's torch sees no GPU
    assert export.serving_limit(None) == (None, "")
    assert export.serving_limit(2**30) == (2**30, "--memory-limit, OMNI_EXPORT_MEMORY_LIMIT")
    gpu = (80 * 10**9, "the memory of Test GPU, the GPU this export runs on")
    monkeypatch.setattr(export, "gpu_memory", lambda: gpu)
    assert export.serving_limit(None) == gpu
    assert export.serving_limit(64 * 2**30) == (64 * 2**30, "--memory-limit, OMNI_EXPORT_MEMORY_LIMIT")
    assert export.serving_limit(100 * 10**9) == gpu


def test_an_export_past_its_gpus_memory_is_refused_naming_the_gpu(english, tmp_path, monkeypatch, capsys):
    """The export's GPU simulated as a small one: refused before writing, the GPU named as the reason."""
    from models import export

    monkeypatch.setattr(export, "gpu_memory", lambda: (65536, "the memory of Test GPU, the GPU this export runs on"))
    directory = tmp_path / "english"
    code = export.main(["laya", "--checkpoint", english[0], "--publish", str(directory), "--memory-limit", "64Gi"])
    assert code == export.DOES_NOT_FIT
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "past the memory limit of 65536 bytes (the memory of Test GPU, the GPU this export runs on)" in line, line
    assert publish.published(str(directory)) == [] and publish.current(str(directory)) is None
