"""Plots of HTTP load results (benchmarks/load.py JSON): latency and throughput against
concurrency, and where the time went per stage (Server-Timing p50).

    python -m benchmarks.plot --title "Laya english, H200" --out docs/plots/laya.png \
        benchmarks/results/laya/run1/http_48.json.gz ...

Each file is one workload; each point is the last measured pass at that concurrency (the
warm-up pass is never in the file). Made where the results are read (needs matplotlib, the
`test` extra has it), not on the GPU machine.
"""

from __future__ import annotations

import argparse
import os

from app.timing import STAGES


def summarize(results: dict, label: str | None = None) -> list[dict]:
    """One row per concurrency level: the last measured pass's figures. `label` replaces the
    file's own (the load's `--label`, often a long server description)."""
    rows = []
    for level in results["levels"]:
        last = level["passes"][-1]
        timing = last.get("server_timing_p50_ms") or {}
        rows.append(
            {
                "label": label or results.get("label") or results.get("workload", "?"),
                "c": level["concurrency"],
                "p50": last["p50_ms"],
                "p95": last["p95_ms"],
                "rps": last["requests_per_s"],
                "dps": last["decisions_per_s"],
                "stages": {s: timing.get(s, 0.0) for s in STAGES},
            }
        )
    return rows


def plot(files: list[str], out: str, title: str, labels: list[str] | None = None) -> list[dict]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from benchmarks.load import read_results

    series = [summarize(read_results(path), labels[i] if labels else None) for i, path in enumerate(files)]
    fig, (lat, thr, stage) = plt.subplots(1, 3, figsize=(16, 4.6))
    for rows in series:
        cs = [r["c"] for r in rows]
        (line,) = lat.plot(cs, [r["p50"] for r in rows], marker="o", label="%s p50" % rows[0]["label"])
        lat.plot(
            cs,
            [r["p95"] for r in rows],
            marker="x",
            linestyle="--",
            color=line.get_color(),
            label="%s p95" % rows[0]["label"],
        )
        thr.plot(cs, [r["dps"] for r in rows], marker="o", label=rows[0]["label"])
    for ax, name in ((lat, "latency, ms"), (thr, "decisions / s")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel(name)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    bars = [r for rows in series for r in rows]
    names = ["%s c=%d" % (r["label"], r["c"]) for r in bars]
    bottom = [0.0] * len(bars)
    for s in STAGES:
        values = [r["stages"][s] for r in bars]
        stage.barh(names, values, left=bottom, label=s)
        bottom = [b + v for b, v in zip(bottom, values)]
    stage.set_xlabel("Server-Timing p50 per stage, ms")
    stage.invert_yaxis()
    stage.tick_params(axis="y", labelsize=7)
    stage.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return bars


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="benchmarks/load.py result files, one per workload")
    ap.add_argument("--out", required=True, help="PNG to write")
    ap.add_argument("--title", default="")
    ap.add_argument("--labels", help="comma-separated names for the files, in order (default: each file's label)")
    args = ap.parse_args(argv)
    labels = args.labels.split(",") if args.labels else None
    if labels is not None and len(labels) != len(args.files):
        ap.error("--labels names %d series for %d files" % (len(labels), len(args.files)))
    for r in plot(args.files, args.out, args.title, labels):
        print(
            "%-22s c=%-3d p50 %8.2f  p95 %8.2f  %8.1f decisions/s" % (r["label"], r["c"], r["p50"], r["p95"], r["dps"])
        )


if __name__ == "__main__":
    main()
