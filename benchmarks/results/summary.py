"""Prints every figure of docs/benchmarks.md from the raw files here: each HTTP pass (p50, p95,
p99, mean ms, requests and decisions a second, rows and forward ms a pass, Server-Timing p50 per
stage), start to ready and GPU memory, a fresh server's first requests, the worker's CPU a
request at c=64, the in-process and HF baselines, and the probes behind "what limits each model".

    python benchmarks/results/summary.py [PART ...]    # laya cua-s1 open-jev-9b clef-flash open-jev-27b tracing traffic
"""
from __future__ import annotations

import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "../..")))

from benchmarks.load import pass_table, read_results  # noqa: E402

MODELS = ("laya", "cua-s1", "open-jev-9b", "clef-flash", "open-jev-27b", "tracing", "traffic")


def rel(path: str) -> str:
    return os.path.relpath(path, HERE)


def load(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def http(model: str) -> None:
    for path in sorted(glob.glob(os.path.join(HERE, model, "run*", "http*.json*"))):
        results = read_results(path)
        print("\n### %s (%s)" % (rel(path), results["workload"].rsplit("/", 1)[-1]))
        print("\n".join(pass_table(results)))


def text(model: str) -> None:
    print("\n### start to ready, GPU memory (MiB after load, after the workloads)")
    for pattern in ("startup.txt", "gpu_mem.txt"):
        for path in sorted(glob.glob(os.path.join(HERE, model, "run*", pattern))):
            with open(path, encoding="utf-8") as f:
                print("%s: %s" % (rel(path), " / ".join(line.strip() for line in f if line.strip())))


def cpu(model: str) -> None:
    print("\n### 8 s at c=64: requests/s, event loop and whole worker CPU a request, loop busy")
    for path in sorted(glob.glob(os.path.join(HERE, model, "run*", "cpu*.json"))):
        c = load(path)["cpu"]
        host = c.get("host") or {}
        print("%s: %.0f/s, loop %.0f us, worker %.0f us, loop busy %.0f%%%s" % (
            rel(path), c["requests_per_s"], c["loop_us"], c["total_us"], c["loop_busy_pct"],
            ", host busy %s%% stolen %s%%" % (host.get("busy_pct"), host.get("steal_pct")) if host else ""))


def hosts(model: str) -> None:
    for path in sorted(glob.glob(os.path.join(HERE, model, "run*", "host*.json"))):
        h = load(path)
        print("%s: %s x %d at %s MHz, steal %s%%, json round trip %s us, int loop %s us" % (
            rel(path), h["cpu"]["model"], h["cpu"]["logical_cores"], h["cpu"]["mhz_mean"],
            h["window"]["steal_pct"], h["python_probe"]["json_roundtrip_us"], h["python_probe"]["int_loop_2000_us"]))


def baseline(path: str) -> None:
    """An HF baseline file (benchmarks.gpu.hf_baseline): mean, p50, p95 ms per workload."""
    for name, r in load(path)["workloads"].items():
        print("%s %s: mean %.1f, p50 %.1f, p95 %.1f ms (%d requests)" % (
            rel(path), name, r["mean_ms"], r["p50_ms"], r["p95_ms"], r["n"]))


def inprocess_qwen(path: str) -> None:
    """A qwen_bench file: p50 ms per export (plain, CUDA graphs) and HF's, per prompt length."""
    data = load(path)
    for length, runs in data["lengths"].items():
        print("%s %s tokens: %s" % (rel(path), length, ", ".join(
            "%s %.2f" % (name, r["p50_ms"]) for name, r in runs.items())))
    if "parity" in data:
        print("parity against transformers fp32:", data["parity"])


def passes(paths: list[str]) -> None:
    """pass_probe files: each batch's shape, its GPU time (CUPTI) and its whole pass."""
    for path in paths:
        for rows, case in load(path)["cases"].items():
            print("%s rows %s %s: GPU %.3f ms, pass %.3f ms, captured %s, kernels %s" % (
                rel(path), rows, case.get("shape"), case.get("gpu_busy_ms") or 0, case["p50_ms"]["pass"],
                case.get("captured"), case.get("kernels_per_pass")))


def laya() -> None:
    d = load(os.path.join(HERE, "laya/run1/inprocess.json"))
    print("\n### in-process, p50 ms (run1)")
    for name, r in d["results"].items():
        print("%-28s p50 %.2f  p95 %.2f" % (name, r["p50_ms"], r["p95_ms"]))
    print("\n### one pass, 48-token rows (pass_probe)")
    passes([os.path.join(HERE, "laya/pass.json")])
    gil = load(os.path.join(HERE, "laya/gil.json"))
    print("\n### py-spy --gil at c=64: samples per thread holding the GIL", gil["threads"])
    print("leaf functions of the loop, %:", gil["leaf_pct"][:8])


def cua() -> None:
    print("\n### in-process, p50 ms")
    for path in sorted(glob.glob(os.path.join(HERE, "cua-s1/run*/inprocess*.json"))):
        inprocess_qwen(path)
    print("\n### one pass (pass_probe), fp16 as served and the FP8-products graph")
    passes([os.path.join(HERE, "cua-s1/pass.json"), os.path.join(HERE, "cua-s1/pass-fp8.json")])
    products(os.path.join(HERE, "cua-s1/gemm.json"))
    gdn(os.path.join(HERE, "cua-s1/gdn.json"), layers=24)


def products(path: str) -> None:
    """gemm_probe: each form's predicted one-pass products, by row count."""
    print("\n### matrix products alone (gemm_probe): a pass's products, predicted from each shape alone")
    for r in load(path):
        if "predicted_model_ms" in r:
            print("%s rows %d %-12s %.3f ms" % (rel(path), r["rows"], r["form"], r["predicted_model_ms"]))


def gdn(path: str, layers: int) -> None:
    """gdn_kernel_probe: GPU us a call, ONNX Runtime's engines against FLA's, and x layers."""
    print("\n### one GatedDeltaNet layer (gdn_kernel_probe), GPU us a call")
    for case in load(path):
        split = case["ort"]["chunked_split"]["gpu_us"]
        fla = case["fla"]["float16"]
        print("%s %d x %d: ORT chunked_split %.0f (x %d layers %.2f ms), auto %.0f; FLA %.0f, replayed %.1f" % (
            rel(path), case["rows"], case["tokens"], split, layers, split * layers / 1000,
            case["ort"]["auto"]["gpu_us"], fla["gpu_us"], fla["graph_us"]))


def jev9() -> None:
    print("\n### HF baselines")
    for path in sorted(glob.glob(os.path.join(HERE, "open-jev-9b/run*/hf*.json"))):
        baseline(path)


def clef() -> None:
    print("\n### HF + Cloudflare's joint head")
    baseline(os.path.join(HERE, "clef-flash/run3/hf.json"))


def jev27() -> None:
    print("\n### HF baselines")
    for path in sorted(glob.glob(os.path.join(HERE, "open-jev-27b/run*/hf*.json"))):
        baseline(path)
    gate = load(os.path.join(HERE, "open-jev-27b/run1/manifest.json"))["check"]["parity_gate"]
    print("parity gate (run1):", {k: gate.get(k) for k in ("device", "max_prob_drift", "top_choice_identical",
                                                          "passes")})
    print("\n### one pass, one row (pass_probe)")
    passes(sorted(glob.glob(os.path.join(HERE, "open-jev-27b/pass-*.json"))))
    products(os.path.join(HERE, "open-jev-27b/gemm.json"))
    gdn(os.path.join(HERE, "open-jev-27b/gdn.json"), layers=48)


def tracing() -> None:
    """What tracing costs: Laya on the H200 (8 s at c=64, off against 1%), and the CPU demo
    (medians of each setting's pass p50s and requests a second)."""
    import statistics

    for kind in ("off", "t1"):
        files = sorted(glob.glob(os.path.join(HERE, "tracing/h200-laya/*-%s.json" % kind)))
        rps = [load(f)["cpu"]["requests_per_s"] for f in files]
        print("H200 Laya c=64, 8 s, %-3s: %s, mean %.0f/s" % (kind, ", ".join("%.0f" % r for r in rps),
                                                           statistics.fmean(rps)))
    for sampling in ("all", "ratio0.1"):
        for c in (1, 16):
            row = {}
            for mode in ("off", "on"):
                levels = [lv for f in sorted(glob.glob(os.path.join(HERE, "tracing/cpu-demo", sampling,
                                                                    "%s-*.json" % mode)))
                          for lv in load(f)["levels"] if lv["concurrency"] == c]
                passes = [p for lv in levels for p in lv["passes"]]
                row[mode] = (statistics.median(p["p50_ms"] for p in passes),
                             statistics.median(p["requests_per_s"] for p in passes))
            print("CPU demo, %s traced, c=%d: p50 %.2f -> %.2f ms (%+.1f%%), %.0f -> %.0f req/s (%+.1f%%)" % (
                sampling, c, row["off"][0], row["on"][0], 100 * (row["on"][0] / row["off"][0] - 1),
                row["off"][1], row["on"][1], 100 * (row["on"][1] / row["off"][1] - 1)))


EXTRA = {"laya": laya, "cua-s1": cua, "open-jev-9b": jev9, "clef-flash": clef, "open-jev-27b": jev27}


def first_requests(model: str) -> None:
    """benchmarks.first_requests: start to ready, then the first requests against the steady state."""
    paths = sorted(glob.glob(os.path.join(HERE, model, "first-requests", "**", "*.json"), recursive=True))
    if paths:
        print("\n### a fresh server's first requests against its steady state (first_requests)")
    for path in paths:
        for lv in load(path)["levels"]:
            first, steady, ratio = lv["first"], lv["steady"], lv["first_over_steady"]
            print("%s c=%d: ready %.1f s, %d captures at ready, %d settled; first mean %.2f p50 %.2f, "
                  "steady mean %.2f p50 %.2f ms (x%.2f mean, x%.2f p50)" % (
                      rel(path), lv["concurrency"], lv["ready_s"], lv["captures_at_ready"],
                      lv["captures_before_steady"], first["mean_ms"], first["p50_ms"], steady["mean_ms"],
                      steady["p50_ms"], ratio["mean_ms"], ratio["p50_ms"]))


def _median(values: list[float]) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def traffic() -> None:
    """benchmarks/gpu/traffic.sh runs: every measured pass of each export served by the measured
    checkout (`new`, `new-TAG` with a setting) and by the old commit (`base`), then each side's
    median requests/s a level over base's."""
    for run in sorted(glob.glob(os.path.join(HERE, "traffic", "*", ""))):
        with open(os.path.join(run, "gpu.txt"), encoding="utf-8") as f:
            print("\n### %s (%s)" % (rel(run.rstrip(os.sep)), f.read().strip()))
        medians: dict[str, dict[int, float]] = {}
        for path in sorted(glob.glob(os.path.join(run, "traffic-*.json"))):
            report = load(path)
            for level in report["levels"]:
                for p in level["passes"]:
                    ran = ""
                    if p.get("run_tokens") not in (None, p.get("real_tokens")):  # a shared head ran once
                        ran = " (as run: %.1f, %.1f%%)" % (p["run_tflops"], 100 * p["run_share_of_peak"])
                    print("%s c=%d: %.1f requests/s, %.0f decisions/s, p50 %.2f ms, p95 %.2f ms, %.1f rows "
                          "a pass, %.1f TFLOP/s (%.1f%% of peak)%s, errors %s" % (
                              report["label"], level["concurrency"], p["requests_per_s"], p["decisions_per_s"],
                              p["p50_ms"], p["p95_ms"], p["rows_per_batch"], p["achieved_tflops"],
                              100 * p["share_of_peak"], ran, p["errors"] or 0))
                medians.setdefault(report["label"], {})[level["concurrency"]] = _median(
                    [p["requests_per_s"] for p in level["passes"]])
        for label, levels in medians.items():
            base = medians.get(label.split("-new")[0] + "-base")
            if label.endswith("-base") or base is None:
                continue
            print("%s over base, median requests/s: %s" % (label, ", ".join(
                "c=%d x%.2f" % (c, v / base[c]) for c, v in levels.items() if c in base)))


def main(argv=None) -> None:
    for model in (argv if argv is not None else sys.argv[1:]) or MODELS:
        print("\n## %s" % model)
        if model in ("tracing", "traffic"):
            tracing() if model == "tracing" else traffic()
            continue
        http(model)
        text(model)
        cpu(model)
        hosts(model)
        first_requests(model)
        EXTRA[model]()


if __name__ == "__main__":
    main()
