"""Load and soak: many concurrent clients mixing valid, invalid and oversized requests.

    python -m tests.soak --url http://127.0.0.1:8000 --clients 64 --requests 100000 --pid SERVER_PID

Every valid request gets question ids of its own (renaming ids must not change Laya's answers),
so each 200 is checked to be the answer to *its* request: the same ids in the same order, and
the same answers as the template's reference answer taken alone before the load. Invalid and
oversized requests must get their 4xx problem; any 5xx, any 503 without Retry-After, a missing or
cross-wired answer is counted as a failure. With `--pid`, the server's RSS (its process tree) is
sampled during the run.

A test, at any length: tests/app/test_hardening.py runs it for 12 seconds against a tiny export;
the long runs against the demo model are in docs/reliability.md (raw samples in
benchmarks/results/soak/).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time

TEMPLATES = [
    {
        "state": "I was charged twice for my order. Please refund the duplicate today.",
        "questions": {
            "department": {
                "type": "choice",
                "instructions": "Which team should handle this?",
                "criteria": {"billing": "Charges and refunds", "technical": "Software problems"},
            },
            "urgency": {
                "type": "score",
                "instructions": "How urgent is the request?",
                "criteria": ["Not urgent", "Needs attention soon", "Needs attention immediately"],
            },
            "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
        },
    },
    {
        "state": {"ticket": "The app crashes after the update", "tags": ["android", "v2.3"]},
        "questions": {
            "bug": {"type": "noul", "instructions": "Is this a bug report?", "criteria": {"true": "A defect"}}
        },
    },
    {
        "state": ["hi", "my parcel never arrived", "it has been three weeks"],
        "questions": {
            "topic": {
                "type": "choice",
                "instructions": "Topic?",
                "criteria": ["shipping", "billing", "login", "other"],
            },
            "angry": {
                "type": "score",
                "instructions": "How angry?",
                "criteria": ["calm", "annoyed", "angry", "furious"],
            },
        },
    },
]
INVALID = [
    (
        b'{"state": "x", "questions": {"q": {"type": "choice", "instructions": "x", "criteria": []}}}',
        422,
        "invalid_question",
    ),
    (
        b'{"model": "nope", "state": "x", "questions": {"q": {"type": "noul", "instructions": "x"}}}',
        422,
        "unknown_model",
    ),
    (b'{"state": "x", "questions": ', 400, "malformed_request"),
]


def rss_kib(pid: int) -> int:
    """Resident memory of a process and its descendants (Granian runs its worker as a child)."""
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            with open("/proc/%d/status" % p) as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
            for task in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, task)) as f:
                    stack.extend(int(c) for c in f.read().split())
        except (OSError, StopIteration):
            pass
    return total


def close(a: dict, b: dict, tol: float = 2e-3) -> bool:
    if a.keys() != b.keys():
        return False
    for k, v in a.items():
        w = b[k]
        if isinstance(v, dict):
            if not isinstance(w, dict) or not close(v, w, tol):
                return False
        elif isinstance(v, float) and isinstance(w, (int, float)):
            if abs(v - w) > tol:
                return False
        elif k not in ("choice",) and v != w:
            return False
    return True


def _request(n: int, roll: float, oversized_bytes: int) -> tuple[bytes, int, object]:
    """Request n: (body, the status it must get, the problem code it must get, or for a 200
    the index of its template): a tenth invalid, 3% oversized where asked, else a template with
    question ids of its own."""
    if roll < 0.1:
        return INVALID[n % len(INVALID)]
    if roll < 0.13 and oversized_bytes:
        return b'{"state": "' + b"x" * oversized_bytes + b'", "questions": {}}', 413, "too_large"
    i = n % len(TEMPLATES)
    t = TEMPLATES[i]
    renamed = {"%s_%d" % (q, n): d for q, d in t["questions"].items()}
    return json.dumps({"state": t["state"], "questions": renamed}).encode(), 200, i


def _judge(r, n: int, status: int, code, reference: list, stats: dict) -> None:
    """Count request n's answer `r` in `stats`: its own id echoed, no 5xx (a 503 says when to
    retry), a 200 with its own questions' answers equal to its template's alone, or the
    expected problem."""
    stats["sent"] += 1
    stats["status"][r.status_code] = stats["status"].get(r.status_code, 0) + 1
    if r.headers.get("x-request-id") != "soak-%d" % n:
        stats["failures"].append("request %d: request id not echoed" % n)
    if r.status_code >= 500 or r.status_code == 503 and "retry-after" not in r.headers:
        stats["failures"].append("request %d: %d %s" % (n, r.status_code, r.text[:200]))
    elif status == 200:
        if r.status_code != 200:
            stats["failures"].append("request %d: expected 200, got %d %s" % (n, r.status_code, r.text[:200]))
            return
        answers = r.json()["answers"]
        want = list(TEMPLATES[code]["questions"])
        got = [q.rsplit("_", 1)[0] for q in answers]
        ids_ok = list(answers) == ["%s_%d" % (q, n) for q in want]
        values_ok = ids_ok and all(close(answers["%s_%d" % (q, n)], reference[code][q]) for q in want)
        if not (ids_ok and values_ok):
            stats["failures"].append("request %d: answers do not belong to it (%s)" % (n, got))
        else:
            stats["ok"] += 1
    else:
        body = r.json() if r.headers.get("content-type", "").endswith("json") else {}
        if r.status_code != status or body.get("code") != code:
            stats["failures"].append(
                "request %d: expected %d %s, got %d %s" % (n, status, code, r.status_code, r.text[:200])
            )
        else:
            stats["expected_errors"] += 1


async def run(
    url: str,
    clients: int = 64,
    requests: int = 1000,
    seconds: float = 0.0,
    oversized_bytes: int = 0,
    pid: int | None = None,
    seed: int = 0,
) -> dict:
    import httpx

    rng = random.Random(seed)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    stats = {"sent": 0, "ok": 0, "expected_errors": 0, "failures": [], "status": {}, "rss_kib": []}
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        reference = []
        for t in TEMPLATES:
            r = await client.post("/v1/systemone", json=t)
            r.raise_for_status()
            reference.append(r.json()["answers"])
        deadline = time.monotonic() + seconds if seconds else None
        counter = iter(range(10**9))

        async def one_client(k: int) -> None:
            while True:
                n = next(counter)
                if (deadline and time.monotonic() > deadline) or (not deadline and n >= requests):
                    return
                content, status, code = _request(n, rng.random(), oversized_bytes)
                try:
                    r = await client.post(
                        "/v1/systemone",
                        content=content,
                        headers={"content-type": "application/json", "x-request-id": "soak-%d" % n},
                    )
                except httpx.HTTPError as exc:
                    stats["failures"].append("request %d: transport error %r" % (n, exc))
                    continue
                _judge(r, n, status, code, reference, stats)

        async def sample_rss() -> None:
            while pid:
                stats["rss_kib"].append((stats["sent"], rss_kib(pid)))
                await asyncio.sleep(1.0)

        sampler = asyncio.create_task(sample_rss())
        t0 = time.monotonic()
        await asyncio.gather(*(one_client(k) for k in range(clients)))
        stats["wall_s"] = time.monotonic() - t0
        sampler.cancel()
        if pid:
            stats["rss_kib"].append((stats["sent"], rss_kib(pid)))
    return stats


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--requests", type=int, default=100000)
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument(
        "--oversized-bytes",
        type=int,
        default=0,
        help="also send bodies of this size (set above the server's OMNI_MAX_BODY_BYTES)",
    )
    ap.add_argument("--pid", type=int)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    stats = asyncio.run(run(args.url, args.clients, args.requests, args.seconds, args.oversized_bytes, args.pid))
    rss = stats["rss_kib"]
    summary = {k: v for k, v in stats.items() if k not in ("failures", "rss_kib")}
    summary["failures"] = len(stats["failures"])
    if rss:
        summary["rss_mib_first_last_max"] = [
            round(rss[0][1] / 1024, 1),
            round(rss[-1][1] / 1024, 1),
            round(max(v for _, v in rss) / 1024, 1),
        ]
    print(json.dumps(summary, indent=1))
    for f in stats["failures"][:20]:
        print("FAIL", f)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(stats, f)
    return 1 if stats["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
