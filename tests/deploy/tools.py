"""The image test's setup: the Compose v2 binary, Debian's engine packages, the local base image.
Each step is a small script beside this file, so a person can run the same thing by hand.

Where a step truly cannot run (not root, nothing to install it from), the tests skip with the
reason, except in CI (CI=true), where a skipped image test would hide a broken image: there
they fail instead.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def cannot_run(reason: str):
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail("the image test must run in CI, but: " + reason, pytrace=False)
    pytest.skip(reason)


def script(name: str, *args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", os.path.join(HERE, name), *args],
        env={**(env or os.environ), "PY": sys.executable},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def compose_binary() -> str:
    """Path of the pinned Compose v2 binary (get_compose.sh)."""
    proc = script("get_compose.sh")
    if proc.returncode != 0:
        cannot_run("no Docker Compose v2 binary (tests/deploy/get_compose.sh): " + proc.stderr[-2000:])
    return proc.stdout.strip().splitlines()[-1]


def ensure_engine_packages() -> None:
    """dockerd, containerd, runc, the docker CLI and debootstrap from Debian (get_engine.sh)."""
    if os.geteuid() != 0:
        cannot_run("the image test starts its own dockerd and debootstraps a base image: it needs root")
    proc = script("get_engine.sh")
    if proc.returncode != 0:
        cannot_run("cannot install the engine packages (tests/deploy/get_engine.sh): " + proc.stderr[-2000:])


def make_base_image(tag: str, env: dict) -> None:
    """A Debian bookworm base (python3 3.11 + venv) imported as `tag` (make_base.sh)."""
    proc = script("make_base.sh", tag, env=env)
    assert proc.returncode == 0, "make_base.sh failed:\n" + proc.stderr[-4000:]
