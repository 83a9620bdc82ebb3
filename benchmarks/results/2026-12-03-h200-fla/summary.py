"""Prints the FLA session's figures (docs/benchmarks.md, "FLA session") from raw/: Cua-S1 in-process
against HF eager without and with flash-linear-attention, one GatedDeltaNet layer in ONNX
Runtime's kernel against FLA's, HF on the Open-Jev 9B mix without and with FLA, the Laya passes,
and each bench's host facts.

    python benchmarks/results/2026-12-03-h200-fla/summary.py
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


def main() -> None:
    print("## Cua-S1 4B in-process, one row, p50 ms (20 calls after 5)")
    runs = {v: json.load(open(os.path.join(RAW, "fla", "inprocess-%s.json" % v))) for v in ("nofla", "fla")}
    for n in runs["nofla"]["lengths"]:
        ours = [runs[v]["lengths"][n]["gdnf+graphs"]["p50_ms"] for v in runs]
        hf = {v: runs[v]["lengths"][n]["hf-eager-bf16"]["p50_ms"] for v in runs}
        print("%5s tokens: ours (CUDA graphs) %s; HF eager bf16 %.1f, with FLA %.1f (%.1fx ours, %.2fx HF without)"
              % (n, ", ".join("%.2f" % o for o in ours), hf["nofla"], hf["fla"], hf["fla"] / ours[1],
                 hf["nofla"] / hf["fla"]))
    print("   HF's first call with FLA (Triton compiles): %s ms" % {
        n: v["hf-eager-bf16"] for n, v in runs["fla"]["first_call_ms"].items()})
    print("\n## Open-Jev 9B noul mix, HF eager bf16 in-process (a third lease; ours was not measured there)")
    for v in ("nofla", "fla", "fla-again"):
        r = json.load(open(os.path.join(RAW, "jev", "hf-jev-%s.json" % v)))["workloads"]["open_jev_noul.jsonl"]
        print("%-9s mean %.1f, p50 %.1f, p95 %.1f ms (n=%d)" % (v, r["mean_ms"], r["p50_ms"], r["p95_ms"], r["n"]))
    print("\n## One GatedDeltaNet layer, GPU µs a call (CUPTI kernels; FLA also replayed 8 a CUDA graph)")
    for path in sorted(glob.glob(os.path.join(RAW, "gdn", "gdn-*.json"))):
        for r in json.load(open(path)):
            ort = {p: "%.0f (%d kernels)" % (x["gpu_us"], x["kernels"]) for p, x in r["ort"].items()}
            fla = {p: "%.0f, graph %.0f (%d kernels)" % (x["gpu_us"], x["graph_us"], x["kernels"])
                   for p, x in r["fla"].items() if "error" not in x}
            diff = r.get("max_abs_diff_reference", r["max_abs_diff"])
            print("%s %dx%d: ORT %s; FLA %s; max |diff| %s" % (os.path.basename(path), r["rows"], r["tokens"], ort, fla,
                                                             {k: "%.1e" % v for k, v in diff.items()}))
    for path in sorted(glob.glob(os.path.join(RAW, "laya*", "**", "http_*.json"), recursive=True)):
        print("\n## %s" % os.path.relpath(path, RAW))
        print("\n".join(pass_table(read_results(path))))
        cpu = json.load(open(os.path.join(os.path.dirname(path), "cpu_mha16-320.json")))["cpu"]
        print("c=64 for 8 s: %.0f/s, loop %.0f µs a request, host %s" % (cpu["requests_per_s"], cpu["loop_us"], cpu["host"]))
    print("\n## hosts")
    for path in sorted(glob.glob(os.path.join(RAW, "**", "host*.json"), recursive=True)):
        print(os.path.relpath(path, RAW), summary(json.load(open(path))))


if __name__ == "__main__":
    main()
