"""benchmarks/gpu/traffic.sh, the GPU machine's traffic rows, run here on the CPU (DEVICE=cpu)
against the tiny english export: this checkout and a copy of its app/ and models/ (BASE) served
one after the other, each loaded with the same seeded traffic."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT, free_port


@pytest.mark.slow
def test_traffic_rows_for_this_checkout_and_a_base(english, tmp_path):
    base = tmp_path / "base"
    for part in ("app", "models"):
        shutil.copytree(os.path.join(ROOT, part), base / part, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "out"
    env = {
        **os.environ,
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
        "EXPORTS": english[1],
        "BASE": str(base),
        "DEVICE": "cpu",
        "CONCURRENCY": "1,4",
        "REQUESTS": "16",
        "N": "16",
        "PORT": str(free_port()),
        "OUT": str(out),
    }
    proc = subprocess.run(
        ["bash", "benchmarks/gpu/traffic.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    name = os.path.basename(english[1])
    reports = {side: json.loads((out / ("traffic-%s-%s.json" % (name, side))).read_text()) for side in ("new", "base")}
    tokens = {}
    for side, report in reports.items():
        assert [level["concurrency"] for level in report["levels"]] == [1, 4]
        for level in report["levels"]:
            for p in level["passes"]:
                assert p["ok"] == p["requests"] == 16 and p["errors"] == {}
                assert p["real_tokens"] > 0 and 0 < p["share_of_peak"] < 1
                assert p["decisions_per_s"] >= p["requests_per_s"]  # 1-3 questions a request
        tokens[side] = [p["real_tokens"] for level in report["levels"] for p in level["passes"]]
    # The same traffic, the same tokenizer: both sides served the same real tokens in every pass.
    assert tokens["new"] == tokens["base"]

    # A setting for this checkout's server alone, its files named apart by TAG.
    env.pop("BASE")
    env.update({"SERVER_ENV": "OMNI_MAX_BATCH_ROWS=8", "TAG": "rows8", "CONCURRENCY": "4", "PORT": str(free_port())})
    proc = subprocess.run(
        ["bash", "benchmarks/gpu/traffic.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    tagged = json.loads((out / ("traffic-%s-new-rows8.json" % name)).read_text())
    c4 = [p["real_tokens"] for p in reports["new"]["levels"][-1]["passes"]]
    assert [p["real_tokens"] for level in tagged["levels"] for p in level["passes"]] == c4
