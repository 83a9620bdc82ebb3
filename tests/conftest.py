"""Shared fixtures: tiny random-weight Laya checkpoints (published layout, locally trained
tokenizer), their ONNX exports, the `laya` reference agents, and real Granian servers."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import warnings

import httpx
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory):
    return tmp_path_factory.mktemp("omni")


def _build_and_export(root, variant: str):
    from models.laya import export, random_checkpoint

    checkpoint = random_checkpoint.build(str(root / ("ck-" + variant)), variant, "tiny", seed=7)
    out = str(root / ("ex-" + variant))
    export.export(checkpoint, out, progress=None)
    return checkpoint, out


@pytest.fixture(scope="session")
def english(artifacts):
    """(checkpoint dir, export dir) of a tiny english-shaped Laya."""
    return _build_and_export(artifacts, "english")


@pytest.fixture(scope="session")
def multilingual(artifacts):
    return _build_and_export(artifacts, "multilingual")


@pytest.fixture(scope="session")
def laya_english(english):
    import laya

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return laya.Agent(english[0], device="cpu")


@pytest.fixture(scope="session")
def laya_multilingual(multilingual):
    import laya

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return laya.Agent(multilingual[0], device="cpu")


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
def run_server(tmp_path, env: dict, wait_ready: bool = True, timeout: float = 90.0):
    """A real Granian process (one worker) serving app.main:app on a free loopback port."""
    port = free_port()
    log_path = str(tmp_path / ("server-%d.log" % port))
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("OMNI_")}
    full_env.update(env)
    full_env["PYTHONUNBUFFERED"] = "1"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "granian", "--interface", "asgi", "--workers", "1",
             "--host", "127.0.0.1", "--port", str(port), "app.main:app"],
            cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = Server(proc, port, log_path)
    try:
        deadline = time.monotonic() + timeout
        path = "/readyz" if wait_ready else "/livez"
        while True:
            if proc.poll() is not None:
                raise RuntimeError("server exited early:\n" + server.log())
            try:
                if httpx.get(server.url + path, timeout=2).status_code == 200:
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


@pytest.fixture(scope="module")
def server(english, tmp_path_factory):
    """The english export served with default settings."""
    with run_server(tmp_path_factory.mktemp("srv"), {"OMNI_MODELS": english[1]}) as s:
        yield s


class Pipeline:
    """prepare → pack → ONNX Runtime (CPU) → unpack → finish, in-process, for one export."""

    def __init__(self, export_dir: str):
        import onnxruntime as ort

        from models.registry import load

        self.model = load(export_dir)
        self.session = ort.InferenceSession(self.model.onnx_path, providers=["CPUExecutionProvider"])

    def outputs(self, bodies: list[dict]):
        prepared = [self.model.prepare(b) for b in bodies]
        works = [p.work for p in prepared]
        packed = self.model.adapter.pack(works)
        raw = (self.session.run(None, packed.feeds) if packed.parts is None
               else [self.session.run(None, feeds) for feeds in packed.parts])
        return prepared, self.model.adapter.unpack(raw, works, packed), packed

    def __call__(self, body: dict, profile: str = "reference") -> dict:
        (prepared,), (output,), _ = self.outputs([body])
        return self.model.finish(prepared, output, profile, self.model.name, requested=body.get("model"))


@pytest.fixture(scope="session")
def pipeline_english(english):
    return Pipeline(english[1])


@pytest.fixture(scope="session")
def pipeline_multilingual(multilingual):
    return Pipeline(multilingual[1])
