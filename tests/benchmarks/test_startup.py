"""benchmarks.startup against a real server it did not start: start-to-ready, then the first
request timed; and a dead or silent port ends it with status 1 instead of a hang."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

from benchmarks import startup
from tests.server import free_port, run_server


def _workload(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_text(
        "\n"
        + json.dumps(
            {
                "model": "english",
                "state": "I was charged twice.",
                "questions": {"refund": {"type": "noul", "instructions": "Refund?"}},
            }
        )
        + "\n"
    )
    return str(path)


def test_ready_then_the_first_request_is_timed(english, tmp_path, capsys):
    since = time.time()
    with run_server(tmp_path, {"OMNI_MODELS": english[1]}, wait_ready=False) as server:
        readyz = tmp_path / "readyz.json"
        rc = startup.main(
            [
                "--since",
                str(since),
                "--port",
                str(server.port),
                "--pid",
                str(server.proc.pid),
                "--first",
                _workload(tmp_path),
                "--readyz-out",
                str(readyz),
            ]
        )
        served = server.log()
    assert rc == 0
    line = capsys.readouterr().out.strip()
    m = re.fullmatch(r"port %d: start-to-ready ([\d.]+) s, first request ([\d.]+) ms" % server.port, line)
    assert m, line
    assert 0.0 < float(m.group(1)) < 90.0 and float(m.group(2)) > 0.0
    assert json.loads(readyz.read_text())["status"] == "ready"
    assert "Traceback" not in served


def test_a_server_that_exited_ends_the_wait(tmp_path, capsys):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    t0 = time.monotonic()
    rc = startup.main(
        [
            "--since",
            str(time.time()),
            "--port",
            str(free_port()),
            "--pid",
            str(dead.pid),
            "--first",
            _workload(tmp_path),
            "--timeout",
            "60",
        ]
    )
    assert rc == 1 and time.monotonic() - t0 < 10
    assert "exited before it was ready" in capsys.readouterr().err


def test_a_silent_port_ends_the_wait_at_the_timeout(tmp_path, capsys):
    rc = startup.main(
        ["--since", str(time.time()), "--port", str(free_port()), "--first", _workload(tmp_path), "--timeout", "0.5"]
    )
    assert rc == 1
    assert re.search(r"was not ready in [01] s", capsys.readouterr().err)
