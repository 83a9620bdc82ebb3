"""benchmarks.load against a real server: passes, warm-up size and per-request records."""

from __future__ import annotations

import json

import httpx

from benchmarks import load


def test_load_report_with_per_request_records(server, tmp_path, capsys):
    bodies = [
        {
            "state": "refund my order %d" % i,
            "questions": {
                "q": {"type": "noul", "instructions": "Refund?"},
                "d": {"type": "choice", "instructions": "Team?", "criteria": ["billing", "tech"]},
            },
        }
        for i in range(3)
    ]
    workload = tmp_path / "w.jsonl"
    workload.write_text("".join(json.dumps(b) + "\n" for b in bodies))
    out = tmp_path / "r.json"
    load.main(
        [
            "--url",
            server.url,
            "--workload",
            str(workload),
            "--concurrency",
            "1,2",
            "--requests",
            "6",
            "--warmup",
            "3",
            "--per-request",
            "--procs",
            "1",
            "--out",
            str(out),
            "--params-b",
            "0.5",
            "--peak-tflops",
            "100",
        ]
    )
    report = json.loads(out.read_text())
    # Each line's real tokens as its response's usage counts them (padding never counts).
    usage = [httpx.post(server.url + "/v1/systemone", json=b).json()["usage"]["input_tokens"] for b in bodies]
    assert [level["concurrency"] for level in report["levels"]] == [1, 2]
    for level in report["levels"]:
        assert len(level["passes"]) == 2
        for p in level["passes"]:
            assert p["ok"] == p["requests"] == 6 and p["errors"] == {}
            assert p["decisions_per_s"] == 2 * p["requests_per_s"]
            assert sorted(r[0] for r in p["per_request"]) == [0, 0, 1, 1, 2, 2]  # each line twice
            assert all(r[2] == 200 and r[1] > 0 for r in p["per_request"])
            # Sent within the pass, in order within a client (one client at c=1), each with its stages.
            sent = [r[3] for r in p["per_request"]]
            assert all(0 <= t <= p["wall_s"] for t in sent)
            if level["concurrency"] == 1:
                assert sent == sorted(sent)
            assert all("prepare;dur=" in r[4] and "total;dur=" in r[4] for r in p["per_request"])
            assert p["p50_ms"] <= p["p99_ms"] and set(p["server_timing_p50_ms"]) >= {"prepare", "infer", "total"}
            # The server's counters over the pass: each of its 6 requests has 2 rows, in 1-6 passes.
            assert 1 <= p["batches"] <= 6 and p["rows_per_batch"] * p["batches"] == 12
            assert p["padding_tokens_per_batch"] >= 0
            assert 0 < p["forward_ms_per_batch"] < 1000 * p["wall_s"]
            # Achieved compute from the real tokens: each line twice, 2 FLOP a parameter a token.
            assert p["real_tokens"] == 2 * sum(usage)
            assert abs(p["achieved_tflops"] - 2 * 0.5e9 * p["real_tokens"] / p["wall_s"] / 1e12) < 1e-12
            assert abs(p["share_of_peak"] - p["achieved_tflops"] / 100) < 1e-12
    assert "c=2" in capsys.readouterr().out
    # The summaries' table: a row a measured pass, in order, each with its stages' p50.
    header, *rows = load.pass_table(load.read_results(str(out)))
    assert header.split(" | ")[-5:] == ["decode", "prepare", "queue", "infer", "finish"]
    passes = [(level["concurrency"], p) for level in report["levels"] for p in level["passes"]]
    assert len(rows) == len(passes) == 4
    for row, (c, p) in zip(rows, passes):
        cells = [cell.strip() for cell in row.split("|")]
        assert int(cells[0]) == c and float(cells[1]) == round(p["p50_ms"], 2)
        assert float(cells[12]) == round(p["server_timing_p50_ms"]["infer"], 2)


def test_scraped_counters_count_what_was_served(server):
    """benchmarks.scrape sums a sample over the series whose labels match (loop_profile's count
    of answered decisions); a label value nobody has sums to 0."""
    from benchmarks import loop_profile, scrape

    before = loop_profile._served(server.url)
    for _ in range(3):
        assert (
            httpx.post(
                server.url + "/v1/systemone",
                json={"state": "refund please", "questions": {"q": {"type": "noul", "instructions": "Refund?"}}},
            ).status_code
            == 200
        )
    assert loop_profile._served(server.url) - before == 3
    assert scrape.totals(server.url, ["omni_requests_total"], {"route": "/nowhere"}) == {"omni_requests_total": 0.0}


def test_client_loops_send_the_same_requests(server, tmp_path):
    """Each client kind (asyncio, uvloop, blocking sockets in threads) sends every request of a
    pass, reads every answer through, and reports the server's stages: the client kind changes
    only what the client adds to the latency."""
    bodies = [
        {"state": "refund my order %d" % i, "questions": {"q": {"type": "noul", "instructions": "Refund?"}}}
        for i in range(2)
    ]
    workload = tmp_path / "w.jsonl"
    workload.write_text("".join(json.dumps(b) + "\n" for b in bodies))
    for kind in ("uvloop", "blocking"):
        out = tmp_path / ("%s.json" % kind)
        load.main(
            [
                "--url",
                server.url,
                "--workload",
                str(workload),
                "--concurrency",
                "1,2",
                "--requests",
                "4",
                "--warmup",
                "2",
                "--per-request",
                "--procs",
                "1",
                "--client-loop",
                kind,
                "--out",
                str(out),
            ]
        )
        report = json.loads(out.read_text())
        assert report["client_loop"] == kind
        for level in report["levels"]:
            for p in level["passes"]:
                assert p["ok"] == p["requests"] == 4 and p["errors"] == {}
                assert sorted(r[0] for r in p["per_request"]) == [0, 0, 1, 1]
                assert "infer" in p["server_timing_p50_ms"] and p["p50_ms"] > 0


def test_every_level_sends_the_same_requests(server, tmp_path):
    """Client k of c sends lines k, k + c, ...: a pass at any concurrency, over any number of
    client processes, sends the workload's first `requests` lines once each, so the levels'
    requests/s and real tokens compare on the same work."""
    bodies = [
        {"state": "order %s" % ("word " * (3 * i + 1)), "questions": {"q": {"type": "noul", "instructions": "Late?"}}}
        for i in range(12)
    ]
    workload = tmp_path / "w.jsonl"
    workload.write_text("".join(json.dumps(b) + "\n" for b in bodies))
    out = tmp_path / "r.json"
    load.main(
        ["--url", server.url, "--workload", str(workload), "--concurrency", "1,2,4", "--requests", "8"]
        + ["--warmup", "4", "--per-request", "--procs", "2", "--out", str(out)]
    )
    report = json.loads(out.read_text())
    tokens = set()
    for level in report["levels"]:
        for p in level["passes"]:
            assert sorted(r[0] for r in p["per_request"]) == list(range(8))
            tokens.add(p["real_tokens"])
            assert p["run_tokens"] == p["real_tokens"]  # Laya's passes run what usage counts, no more
    assert len(tokens) == 1  # the same real tokens at every level (the server's own count)
