"""Prints the snapshot session's figures (docs/benchmarks.md, "snapshot session") from raw/:
every HTTP pass (p50/p95/p99/mean ms, requests and decisions a second, rows and forward ms a
pass, Server-Timing p50 per stage), start to ready and GPU memory, and the in-process baselines.

    python benchmarks/results/2026-12-02-h200-snapshot/summary.py
"""
from __future__ import annotations

import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "../../..")))

from benchmarks.load import pass_table, read_results  # noqa: E402

RAW = os.path.join(HERE, "raw")


def http(path: str) -> None:
    results = read_results(path)
    print("\n## %s (%s)" % (os.path.relpath(path, RAW), results["workload"].rsplit("/", 1)[-1]))
    print("\n".join(pass_table(results)))


def text(pattern: str) -> None:
    for path in sorted(glob.glob(os.path.join(RAW, pattern))):
        with open(path, encoding="utf-8") as f:
            print("%s: %s" % (os.path.relpath(path, RAW), " / ".join(l.strip() for l in f if l.strip())))


def main() -> None:
    for path in sorted(glob.glob(os.path.join(RAW, "*", "http_*.json*"))):
        http(path)
    print("\n## start to ready, GPU memory")
    text("*/startup*.txt")
    text("*/gpu_mem_*.txt")
    print("\n## in-process, p50 ms")
    with open(os.path.join(RAW, "laya/inprocess.json"), encoding="utf-8") as f:
        laya = json.load(f)
    for name, r in laya["results"].items():
        print("laya %-20s p50 %.2f  p95 %.2f" % (name, r["p50_ms"], r["p95_ms"]))
    print("laya parity", laya["parity_vs_first"])
    with open(os.path.join(RAW, "cua/inprocess-cua-s1.json"), encoding="utf-8") as f:
        print("cua-s1", json.dumps(json.load(f))[:900])
    with open(os.path.join(RAW, "laya/cpu_mha16-320.json"), encoding="utf-8") as f:
        print("laya c=64 CPU a request", json.load(f)["cpu"])


if __name__ == "__main__":
    main()
