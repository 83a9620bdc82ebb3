"""Shared fixtures: tiny random-weight Laya checkpoints (published layout, locally trained
tokenizer), their ONNX exports, the `laya` reference agents, and real Granian servers."""

from __future__ import annotations

import warnings

import pytest

from tests.server import ROOT, Server, free_port, run_server  # noqa: F401  (re-exported: tests import them from here)


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


@pytest.fixture(scope="module", params=["rsgi", "asgi"])
def server(english, tmp_path_factory, request):
    """The english export served with default settings, through Granian's RSGI interface (as
    served) and its ASGI one (the app answers either way)."""
    with run_server(tmp_path_factory.mktemp("srv"), {"OMNI_MODELS": english[1]}, interface=request.param) as s:
        yield s


class Pipeline:
    """prepare → pack → ONNX Runtime (CPU) → unpack → finish, in-process, for one export."""

    def __init__(self, export_dir: str):
        import onnxruntime as ort

        from models.registry import load

        self.model = load(export_dir)
        self.session = ort.InferenceSession(self.model.onnx_path, providers=["CPUExecutionProvider"])

    def outputs(self, bodies: list[dict], profile: str = "reference"):
        prepared = [self.model.prepare(b, profile) for b in bodies]
        works = [p.work for p in prepared]
        packed = self.model.adapter.pack(works)
        raw = (
            self.session.run(None, packed.feeds)
            if packed.parts is None
            else [self.session.run(None, feeds) for feeds in packed.parts]
        )
        return prepared, self.model.adapter.unpack(raw, works, packed), packed

    def __call__(self, body: dict, profile: str = "reference") -> dict:
        (prepared,), (output,), _ = self.outputs([body], profile)
        return self.model.finish(prepared, output, profile, self.model.name, requested=body.get("model"))


class Harness:
    """An executor over real exports, driven from one asyncio loop."""

    def __init__(self, exports: list[str], **settings):
        import threading

        from app.config import Settings
        from app.runtime.executor import Executor
        from app.runtime.registry import Registry
        from models.registry import load

        self.settings = Settings(models=tuple(exports), **settings)
        self.registry = Registry([load(d) for d in exports])
        self.loaded = threading.Semaphore(0)
        self.batches = []
        self.executor = Executor(
            self.settings,
            on_loaded=lambda s: self.loaded.release(),
            on_batch=lambda info, jobs: self.batches.append((info, list(jobs))),
        )
        self.executor.start(self.registry.slots)
        for _ in self.registry.slots:
            assert self.loaded.acquire(timeout=60)

    def slot(self, name):
        return self.registry.resolve(name)

    def close(self):
        self.executor.stop()


@pytest.fixture(scope="session")
def pipeline_english(english):
    return Pipeline(english[1])


@pytest.fixture(scope="session")
def pipeline_multilingual(multilingual):
    return Pipeline(multilingual[1])
