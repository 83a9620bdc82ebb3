"""`make serve`'s job: with no models configured, build, export and serve the demo checkpoint."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from app.launch import event_loop, main, port_taken
from tests.conftest import ROOT, free_port


def test_the_event_loop_is_uvloop_unless_the_operator_says():
    assert event_loop({}) == "uvloop"  # a dependency off Windows
    assert event_loop({"GRANIAN_LOOP": "asyncio"}) == "asyncio"
    assert event_loop({"GRANIAN_LOOP": ""}) == "uvloop"


@pytest.mark.slow
def test_launch_serves_the_demo(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMNI_")}
    env.update(OMNI_DEMO_DIR=str(tmp_path / "demo"), PORT=str(port), HOST="127.0.0.1", PYTHONUNBUFFERED="1")
    with open(tmp_path / "launch.log", "w") as log:  # the server writes its own copy
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.launch"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, (tmp_path / "launch.log").read_text()
            try:
                if httpx.get("http://127.0.0.1:%d/readyz" % port, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.2)
        r = httpx.post(
            "http://127.0.0.1:%d/v1/systemone" % port,
            json={
                "state": "I was charged twice.",
                "questions": {"refund": {"type": "noul", "instructions": "Refund?"}},
            },
        )
        assert r.status_code == 200
        assert r.json()["served_by"]["random_weights"] is True
        ready = httpx.get("http://127.0.0.1:%d/readyz" % port).json()
        assert ready["models"][0]["random_weights"] is True
        text = (tmp_path / "launch.log").read_text()
        assert "RANDOM WEIGHTS" in text and "DEMO" in text
        assert "event loop: uvloop.Loop" in text  # never Granian's auto choice (rloop)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def test_launch_refuses_a_port_another_server_holds(monkeypatch):
    """Granian listens with SO_REUSEPORT: a second server would share the port with the first
    (or with an orphaned worker) instead of failing, so launch looks first."""
    port = free_port()
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # as Granian does
        held.bind(("127.0.0.1", port))
        held.listen()
        assert port_taken("127.0.0.1", port) is not None
        monkeypatch.setenv("OMNI_MODELS", "unused")
        with pytest.raises(SystemExit) as exit_:
            main(["--host", "127.0.0.1", "--port", str(port)])
        assert "cannot serve on 127.0.0.1:%d" % port in str(exit_.value.code)
    assert port_taken("127.0.0.1", port) is None


def test_launch_without_the_export_extra_says_what_to_install(tmp_path):
    """No models configured and no torch (the runtime image): the demo build, a child process,
    fails on its import, and the launcher exits with what to do instead of serving nothing."""
    blocked = tmp_path / "no-torch" / "torch"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError(\"No module named 'torch'\")\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMNI_")}
    env.update(
        OMNI_DEMO_DIR=str(tmp_path / "demo"), PORT=str(free_port()), HOST="127.0.0.1", PYTHONPATH=str(blocked.parent)
    )
    done = subprocess.run(
        [sys.executable, "-m", "app.launch"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr
    assert "the demo cannot be built here (No module named 'torch'): install the `export` extra" in done.stderr
    assert "point OMNI_MODELS at exported models" in done.stderr
    assert not (tmp_path / "demo" / "english" / "manifest.json").exists()
