"""tests/runtime_site: a Python with the test servers' environment imports what the runtime image
installs, every model family's served module among them, and nothing the image lacks."""

from __future__ import annotations

import os
import subprocess
import sys

from models.registry import FAMILIES
from tests.server import ROOT, not_in_runtime, runtime_only_env


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=runtime_only_env(dict(os.environ)),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_what_the_image_lacks_is_listed():
    names = not_in_runtime()
    for module in ("torch", "transformers", "onnx", "onnxscript", "peft", "laya", "pytest"):
        assert module in names
    for module in ("onnxruntime", "tokenizers", "numpy", "litestar", "granian", "msgspec", "app", "models"):
        assert module not in names


def test_the_served_path_imports_without_what_the_image_lacks():
    modules = ["app.main", "app.launch", "models.registry", *FAMILIES.values()]
    done = _python(
        "import importlib, sys\nfor m in %r: importlib.import_module(m)\n"
        "print(sorted(n for n in %r if n in sys.modules))" % (modules, not_in_runtime())
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_an_import_the_image_lacks_fails_as_it_would_there():
    done = _python("import torch")
    assert done.returncode != 0
    assert "No module named 'torch': the runtime image does not install it" in done.stderr
    fallback = _python("try:\n    import transformers\nexcept ImportError:\n    print('fallback')")
    assert fallback.returncode == 0 and fallback.stdout.strip() == "fallback"
