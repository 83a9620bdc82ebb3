"""benchmarks.first_requests against real servers it starts (CPU here: no captures): a server a
concurrency, its start-to-ready, its first requests and its steady state, side by side."""

from __future__ import annotations

import json

import pytest

from benchmarks import first_requests


@pytest.mark.slow
def test_first_requests_and_steady_state_of_a_fresh_server(english, tmp_path, monkeypatch, capsys):
    workload = tmp_path / "w.jsonl"
    workload.write_text(
        "".join(
            json.dumps(
                {
                    "model": "english",
                    "state": state,
                    "questions": {"refund": {"type": "noul", "instructions": "Refund?"}},
                }
            )
            + "\n"
            for state in ("I was charged twice.", "My parcel never came, and the tracking page says it was delivered.")
        )
    )
    monkeypatch.setenv("OMNI_MODELS", english[1])
    out = tmp_path / "first.json"
    assert (
        first_requests.main(
            [
                "--workload",
                str(workload),
                "--requests",
                "6",
                "--concurrency",
                "1,2",
                "--quiet",
                "0.2",
                "--settle",
                "5",
                "--procs",
                "1",
                "--label",
                "cpu",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    report = json.loads(out.read_text())
    assert [level["concurrency"] for level in report["levels"]] == [1, 2]
    for level in report["levels"]:
        assert level["ready_s"] > 0 and level["captures_at_ready"] == 0 == level["captures_before_steady"]
        assert level["capture_s_at_ready"] == 0
        (model,) = level["models_at_ready"]
        assert model["name"] == "english" and model["load_ms"] > 0 and model["warmup_ms"] > 0
        assert model["cuda_graphs"] == "off"
        for name in ("first", "steady"):
            assert level[name]["ok"] == level[name]["requests"] == 6 and level[name]["mean_ms"] > 0
        assert len(level["first_ms"]) == 6 == len(level["steady_ms"]) and level["captures_after_first"] == 0
        assert level["first_over_steady"]["mean_ms"] == level["first"]["mean_ms"] / level["steady"]["mean_ms"]
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines] == [["cpu", "c=1"], ["cpu", "c=2"]]


class _Captures:
    """A /metrics endpoint (a real HTTP server on a free loopback port) whose capture counters
    follow a script of (seconds after start, captures, seconds spent capturing)."""

    def __init__(self, script):
        import http.server
        import threading
        import time

        self.t0, self.script = time.monotonic(), script
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                count, spent = owner.now()
                body = (
                    "# TYPE omni_cuda_graph_captures counter\n"
                    'omni_cuda_graph_captures_total{model="m"} %s\n'
                    "# TYPE omni_cuda_graph_capture_seconds counter\n"
                    'omni_cuda_graph_capture_seconds_total{model="m"} %s\n' % (count, spent)
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def now(self):
        import time

        elapsed = time.monotonic() - self.t0
        done = [(count, spent) for at, count, spent in self.script if at <= elapsed]
        return done[-1] if done else (0, 0.0)


def test_settling_waits_out_the_rest_after_a_long_capture():
    """A capture of 0.1 s is followed by 1.9 s of rest (CAPTURE_SHARE 5%), longer than `quiet`:
    the captures have stopped only once a quiet spell outlasts that rest, so the one at 1.3 s is
    waited for, and the wait ends about quiet + 1.9 s after it."""
    from app.runtime.batching import CAPTURE_SHARE

    assert CAPTURE_SHARE == 0.05
    server = _Captures([(0.0, 3, 0.3), (0.2, 4, 0.4), (1.3, 5, 0.5)])
    try:
        waited, captured = first_requests.settle(server.url, quiet=0.4, limit=20)
    finally:
        server.server.shutdown()
    assert captured == 5
    assert 1.3 + 1.9 + 0.4 <= waited < 1.3 + 1.9 + 0.4 + 2.0


def test_settling_without_captures_ends_after_quiet():
    server = _Captures([(0.0, 0, 0.0)])
    try:
        waited, captured = first_requests.settle(server.url, quiet=0.3, limit=20)
    finally:
        server.server.shutdown()
    assert captured == 0 and 0.3 <= waited < 2.0
