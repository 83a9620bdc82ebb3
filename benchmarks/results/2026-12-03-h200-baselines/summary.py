"""Prints the baselines session's figures (docs/benchmarks.md, "baselines session") from raw/:
every HTTP pass beside the HF baseline measured before it in the same lease (mean, p50, p95 ms,
c=1), and each bench's host facts.

    python benchmarks/results/2026-12-03-h200-baselines/summary.py
"""
from __future__ import annotations

import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "../../..")))

from benchmarks.host_facts import summary  # noqa: E402
from benchmarks.load import pass_table, read_results  # noqa: E402

RAW = os.path.join(HERE, "raw")


def http(path: str) -> None:
    results = read_results(path)
    print("\n## %s (%s)" % (os.path.relpath(path, RAW), results["workload"].rsplit("/", 1)[-1]))
    print("\n".join(pass_table(results)))


def main() -> None:
    for path in sorted(glob.glob(os.path.join(RAW, "*", "http_*.json*"))):
        http(path)
    print("\n## HF baselines (in-process, one request at a time)")
    for path in sorted(glob.glob(os.path.join(RAW, "*", "hf-*.json")) + glob.glob(os.path.join(RAW, "hf-ab-*.json"))):
        with open(path, encoding="utf-8") as f:
            for workload, r in json.load(f)["workloads"].items():
                print("%s %s: mean %.2f, p50 %.2f, p95 %.2f ms (n=%d)" % (
                    os.path.relpath(path, RAW), workload, r["mean_ms"], r["p50_ms"], r["p95_ms"], r["n"]))
    print("\n## start to ready, GPU memory")
    for pattern in ("*/startup*.txt", "*/gpu_mem_*.txt"):
        for path in sorted(glob.glob(os.path.join(RAW, pattern))):
            with open(path, encoding="utf-8") as f:
                print("%s: %s" % (os.path.relpath(path, RAW), " / ".join(l.strip() for l in f if l.strip())))
    print("\n## hosts")
    for path in sorted(glob.glob(os.path.join(RAW, "*", "host*.json"))):
        with open(path, encoding="utf-8") as f:
            print("%s: %s" % (os.path.relpath(path, RAW), summary(json.load(f))))
    with open(os.path.join(RAW, "laya/cpu_mha16-320.json"), encoding="utf-8") as f:
        print("laya c=64 CPU a request", json.load(f)["cpu"])


if __name__ == "__main__":
    main()
