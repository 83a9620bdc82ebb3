"""The tests' server harness: a real Granian process (one worker) serving app.main:app on a free
loopback port, as served. Tests take it from here (tests/conftest.py re-exports it); benchmarks
never import it: one that needs a live server of its own starts it through `python -m app.launch`
(benchmarks/loop_profile.py).
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time

import httpx

from app.launch import HTTP2_MAX_HEADERS, event_loop, malloc_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, proc: subprocess.Popen, port: int, log_path: str):
        self.proc, self.port, self.log_path = proc, port, log_path
        self.url = "http://127.0.0.1:%d" % port

    def log(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()


@contextlib.contextmanager
def run_server(tmp_path, env: dict, wait_ready: bool = True, timeout: float = 90.0, interface: str = "rsgi",
               target: str = "app.main:app", port: int | None = None):
    """A real Granian process (one worker) serving `target` (app.main:app, as served) on a free
    loopback port, through the interface it is served with (`rsgi`, app/rsgi.py) unless
    `interface` says `asgi`, on the event loop it is served on (app.launch.event_loop). It waits
    for /readyz 200, or with `wait_ready=False` for /livez to answer at all (503 once a model has
    failed). `port` picks the port (a restarted server takes its predecessor's), else a free one."""
    port = port or free_port()
    log_path = str(tmp_path / ("server-%d.log" % port))
    while os.path.exists(log_path):             # a restart on the port keeps its predecessor's log
        log_path = log_path[:-len(".log")] + "+.log"
    full_env = malloc_env({k: v for k, v in os.environ.items() if not k.startswith("OMNI_")})
    full_env.update(env)
    full_env["PYTHONUNBUFFERED"] = "1"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "granian", "--interface", interface, "--workers", "1",
             "--loop", event_loop(full_env), "--host", "127.0.0.1", "--port", str(port),
             "--http2-max-headers-size", str(HTTP2_MAX_HEADERS), target],
            cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = Server(proc, port, log_path)
    try:
        deadline = time.monotonic() + timeout
        path = "/readyz" if wait_ready else "/livez"
        while True:
            if proc.poll() is not None:
                raise RuntimeError("server exited early:\n" + server.log())
            try:
                status = httpx.get(server.url + path, timeout=2).status_code
                if status == 200 or (not wait_ready and status == 503):
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("server not %s in %ss:\n%s" % (path, timeout, server.log()))
            time.sleep(0.05)
        yield server
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
