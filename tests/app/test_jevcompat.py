"""The `jevcompat` conformance suite (a Jev-compatible server's written spec), run as a subprocess
against a real server in the `jev` profile: with auth off, and with `OMNI_API_KEY` set and the
key given (`--key`, which also runs its auth checks). Every MUST and every SHOULD it tests passes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import run_server

# Requirements jevcompat tests on this server: with a key, its two auth SHOULDs too.
TESTED = {None: {"MUST": 32, "SHOULD": 12}, "jevcompat-test-key": {"MUST": 32, "SHOULD": 14}}


@pytest.mark.parametrize("key", list(TESTED), ids=["auth-off", "auth-on"])
def test_jevcompat_finds_the_jev_profile_conformant(english, tmp_path_factory, key):
    tmp = tmp_path_factory.mktemp("jevcompat")
    env = {"OMNI_MODELS": english[1], "OMNI_PROFILE": "jev", **({"OMNI_API_KEY": key} if key else {})}
    report_path = tmp / "report.json"
    with run_server(tmp, env) as server:
        command = [
            sys.executable,
            "-m",
            "jevcompat.cli",
            "test",
            server.url,
            "--json",
            str(report_path),
            "--timeout",
            "60",
        ] + (["--key", key] if key else [])
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    summary = report["summary"]
    assert summary["verdict"] == "conformant", done.stdout
    for level, tested in TESTED[key].items():
        assert (summary[level]["passed"], summary[level]["failed"], summary[level]["tested"]) == (tested, 0, tested)
    # What the suite reached for: a choice of 255 options, a noul without instructions.
    limits = report["info"]["limits"]
    assert limits["choice options accepted up to"] == 255 and "choice options rejected at" not in limits
    results = {r["id"]: r["status"] for r in report["results"]}
    assert results["noul.no-instructions"] == results["errors.validation-shape"] == "pass"
    assert results["auth.bearer" if key else "auth.ignored-when-off"] == "pass"
