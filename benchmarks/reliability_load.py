"""Reliability under amplified and large bodies (issue 46, items 1 and 2), against a live server.

    python -m benchmarks.reliability_load --export EXPORT_DIR [--seconds 20] [--out result.json]

It starts the server through the product's entry point (`python -m app.launch`, one Granian
worker, CPU) on a free loopback port and measures three things:

- **amplified**: gzip and zstd bodies of a few KB that expand to 32 MiB of empty arrays in the
  state, sent one at a time and two at once, while `/livez` is polled every 20 ms: each
  answer's status and time, the slowest `/livez` answer, the worker's RSS before and after.
- **large**: 8 clients sending the largest valid request (64 questions of 32 options, a
  150 KB state) for `--seconds`: the worker's RSS before, at its peak, when they stop and
  `--settle` seconds later.
- **small while large**: one client sending a one-question request, first alone, then while 4
  clients send the largest requests: its p50 and p99, beside the time one large request takes
  alone (a small request waits at most for the pass in flight).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import sys
import tempfile
import time

import httpx
import zstandard

from benchmarks.loop_profile import _worker_pid, serve

SMALL = {
    "state": "I was charged twice for my order. Please refund the duplicate today.",
    "questions": {"refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"}},
}


def large_body() -> dict:
    """The largest request the demo (Laya) takes: 64 questions, 2,048 options, a 150 KB state."""
    sentence = "The customer wrote again about the order, the refund and the delivery date. "
    state = (sentence * (150_000 // len(sentence) + 1))[:150_000]
    questions = {
        "q%02d" % i: {
            "type": "choice",
            "instructions": "Which option fits best, case %d?" % i,
            "criteria": {"option %d" % j: "the description of option %d" % j for j in range(32)},
        }
        for i in range(64)
    }
    return {"state": state, "questions": questions}


def amplified_json(size: int = 32 << 20) -> bytes:
    head, tail = b'{"state": [', b'[]], "questions": {"q": {"type": "noul", "instructions": "ok?"}}}'
    return head + b"[]," * ((size - len(head) - len(tail)) // 3) + tail


def rss_kib(pid: int) -> int:
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


async def livez_poller(url: str, stop: asyncio.Event, out: list[float]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        while not stop.is_set():
            t0 = time.perf_counter()
            await client.get("/livez")
            out.append(time.perf_counter() - t0)
            await asyncio.sleep(0.02)


async def amplified(url: str, pid: int) -> dict:
    raw = amplified_json()
    bodies = {"gzip": gzip.compress(raw, 9), "zstd": zstandard.ZstdCompressor(level=19).compress(raw)}
    out: dict = {
        "decompressed_bytes": len(raw),
        "compressed_bytes": {k: len(v) for k, v in bodies.items()},
        "rss_before_kib": rss_kib(pid),
        "answers": [],
    }
    stop, lat = asyncio.Event(), []
    poller = asyncio.create_task(livez_poller(url, stop, lat))
    await asyncio.sleep(0.5)
    idle = list(lat)

    async def send(client, enc):
        t0 = time.perf_counter()
        r = await client.post(
            "/v1/systemone", content=bodies[enc], headers={"content-type": "application/json", "content-encoding": enc}
        )
        out["answers"].append(
            {
                "encoding": enc,
                "status": r.status_code,
                "seconds": round(time.perf_counter() - t0, 3),
                "code": r.json().get("code") if r.status_code != 200 else None,
            }
        )

    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        for enc in ("gzip", "zstd", "gzip", "zstd"):
            await send(client, enc)
        for enc in ("gzip", "zstd"):  # two at once
            await asyncio.gather(send(client, enc), send(client, enc))
    await asyncio.sleep(0.5)
    stop.set()
    await poller
    busy = lat[len(idle) :]
    out.update(
        livez_idle_max_ms=round(max(idle) * 1000, 1),
        livez_max_ms=round(max(busy) * 1000, 1),
        livez_p99_ms=round(pct(busy, 0.99) * 1000, 1),
        livez_polls=len(busy),
        rss_after_kib=rss_kib(pid),
    )
    return out


async def closed_loop(url: str, body: bytes, stop: asyncio.Event, lat: list[float], statuses: dict) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        while not stop.is_set():
            t0 = time.perf_counter()
            r = await client.post("/v1/systemone", content=body, headers={"content-type": "application/json"})
            lat.append(time.perf_counter() - t0)
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1


async def large(url: str, pid: int, seconds: float, settle: float, clients: int = 8) -> dict:
    body = json.dumps(large_body()).encode()
    out: dict = {"clients": clients, "body_bytes": len(body), "seconds": seconds, "rss_before_kib": rss_kib(pid)}
    stop, lat, statuses, peak = asyncio.Event(), [], {}, out["rss_before_kib"]
    tasks = [asyncio.create_task(closed_loop(url, body, stop, lat, statuses)) for _ in range(clients)]
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        await asyncio.sleep(0.25)
        peak = max(peak, rss_kib(pid))
    stop.set()
    await asyncio.gather(*tasks)
    out.update(
        rss_peak_kib=peak, rss_end_kib=rss_kib(pid), requests=len(lat), statuses=statuses, p50_s=round(pct(lat, 0.5), 3)
    )
    await asyncio.sleep(settle)
    out["rss_after_settle_kib"] = rss_kib(pid)
    out["settle_s"] = settle
    return out


async def small_while_large(url: str, seconds: float, clients: int = 4) -> dict:
    small, big = json.dumps(SMALL).encode(), json.dumps(large_body()).encode()
    out: dict = {"large_clients": clients}
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:  # one large request alone
        t0 = time.perf_counter()
        await client.post("/v1/systemone", content=big, headers={"content-type": "application/json"})
        out["one_large_alone_s"] = round(time.perf_counter() - t0, 3)
    for phase, n in (("alone", 0), ("with_large", clients)):
        stop, lat, big_lat, statuses = asyncio.Event(), [], [], {}
        tasks = [asyncio.create_task(closed_loop(url, big, stop, big_lat, statuses)) for _ in range(n)]
        if n:
            await asyncio.sleep(2.0)  # the large clients are under way
        tasks.append(asyncio.create_task(closed_loop(url, small, stop, lat, statuses)))
        await asyncio.sleep(seconds)
        stop.set()
        await asyncio.gather(*tasks)
        out[phase] = {
            "small_requests": len(lat),
            "small_p50_ms": round(pct(lat, 0.5) * 1000, 1),
            "small_p99_ms": round(pct(lat, 0.99) * 1000, 1),
            "small_max_ms": round(max(lat) * 1000, 1),
            "large_requests": len(big_lat),
            "large_p50_s": round(pct(big_lat, 0.5), 3) if big_lat else None,
            "statuses": statuses,
        }
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", required=True)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--settle", type=float, default=10.0)
    ap.add_argument("--only", choices=["amplified", "large", "small"], action="append")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMNI_")}
    env.update(OMNI_MODELS=args.export, OMNI_DEVICE="cpu")
    result: dict = {"export": args.export, "cpus": os.cpu_count(), "argv": sys.argv[1:]}
    phases = args.only or ["amplified", "large", "small"]
    with tempfile.TemporaryDirectory() as tmp, serve(env, os.path.join(tmp, "server.log")) as (url, parent):
        pid = _worker_pid(parent)
        result["rss_ready_kib"] = rss_kib(pid)
        if "amplified" in phases:
            result["amplified"] = asyncio.run(amplified(url, pid))
            print(json.dumps(result["amplified"]), flush=True)
        if "large" in phases:
            result["large"] = asyncio.run(large(url, pid, args.seconds, args.settle))
            print(json.dumps(result["large"]), flush=True)
        if "small" in phases:
            result["small_while_large"] = asyncio.run(small_while_large(url, args.seconds))
            print(json.dumps(result["small_while_large"]), flush=True)
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
