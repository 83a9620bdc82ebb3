"""The tests' server harness: a real Granian process (one worker) serving app.main:app on a free
loopback port, as served. Tests take it from here (tests/conftest.py re-exports it); benchmarks
never import it: one that needs a live server of its own starts it through `python -m app.launch`
(benchmarks/loop_profile.py).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import time

import httpx

from app.launch import HTTP2_MAX_HEADERS, event_loop, malloc_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNTIME_SITE = os.path.join(ROOT, "tests", "runtime_site")


def _runtime_lock() -> str:
    """The lock of the image this machine stands in for: the GPU image's where onnxruntime-gpu is
    installed (the GPU tier), else the CPU image's."""
    try:
        importlib.metadata.distribution("onnxruntime-gpu")
    except importlib.metadata.PackageNotFoundError:
        return os.path.join(ROOT, "requirements", "cpu.txt")
    return os.path.join(ROOT, "requirements", "gpu.txt")


RUNTIME_LOCK = _runtime_lock()


def _distribution(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def not_in_runtime() -> tuple[str, ...]:
    """The top-level modules installed here that the runtime image lacks: each one's distributions
    are all outside the runtime lock (requirements/cpu.txt, or gpu.txt) and are not this project (torch,
    transformers, onnx, pytest and the rest of the `export` and `test` extras)."""
    with open(RUNTIME_LOCK, encoding="utf-8") as f:
        runtime = {_distribution(m.group(1)) for m in re.finditer(r"^([A-Za-z0-9_.-]+)==", f.read(), re.M)}
    runtime.update(("system1-omni", "pip", "setuptools"))  # this project; the image's installers
    return tuple(
        sorted(
            module
            for module, dists in importlib.metadata.packages_distributions().items()
            if not module.startswith("_") or module == "_pytest"
            if not any(_distribution(d) in runtime for d in dists)
        )
    )


@functools.cache
def models_not_in_runtime() -> tuple[str, ...]:
    """The modules of models/ the runtime image leaves out: the exporters and what only they
    import (deploy/served_modules.py, which the Dockerfile copies models/ through)."""
    spec = importlib.util.spec_from_file_location("served_modules", os.path.join(ROOT, "deploy", "served_modules.py"))
    served = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(served)
    return tuple(sorted(served.all_modules(ROOT) - served.served_modules(ROOT)))


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


def runtime_only_env(env: dict) -> dict:
    """`env` for a Python that cannot import what the runtime image lacks (tests/runtime_site)."""
    return {
        **env,
        "PYTHONPATH": os.pathsep.join(p for p in (RUNTIME_SITE, env.get("PYTHONPATH")) if p),
        "NOT_IN_RUNTIME_IMAGE": ",".join(not_in_runtime()),
        "NOT_IN_RUNTIME_MODULES": ",".join(models_not_in_runtime()),
    }


@contextlib.contextmanager
def run_server(
    tmp_path,
    env: dict,
    wait_ready: bool = True,
    timeout: float = 90.0,
    interface: str = "rsgi",
    target: str = "app.main:app",
    port: int | None = None,
    cwd: str = ROOT,
):
    """A real Granian process (one worker) serving `target` (app.main:app, as served) on a free
        loopback port, through the interface it is served with (`rsgi`, app/rsgi.py) unless
        `interface` says `asgi`, on the event loop it is served on (app.launch.event_loop). It waits
        for /readyz 200, or with `wait_ready=False` for /livez to answer at all (503 once a model has
        failed). `port` picks the port (a restarted server takes its predecessor's), else a free one;
    `cwd`, the tree it serves from (the repository's).
        The process cannot import what the runtime image does not install (not_in_runtime,
        tests/runtime_site), so the tests serve as the image does."""
    port = port or free_port()
    log_path = str(tmp_path / ("server-%d.log" % port))
    while os.path.exists(log_path):  # a restart on the port keeps its predecessor's log
        log_path = log_path[: -len(".log")] + "+.log"
    full_env = malloc_env({k: v for k, v in os.environ.items() if not k.startswith("OMNI_")})
    full_env.update(env)
    full_env["PYTHONUNBUFFERED"] = "1"
    full_env = runtime_only_env(full_env)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "granian",
                "--interface",
                interface,
                "--workers",
                "1",
                "--loop",
                event_loop(full_env),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--http2-max-headers-size",
                str(HTTP2_MAX_HEADERS),
                target,
            ],
            cwd=cwd,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
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
