"""Render the Grafana dashboard's panels from a real Prometheus, as a PNG (for docs).

    python deploy/grafana/preview.py --prometheus http://127.0.0.1:9090 --minutes 5 --out docs/dashboard.png

Each panel's PromQL runs through Prometheus' query_range API and is drawn in the dashboard's
grid. This is a preview of the same queries, not Grafana itself: the compose stack serves the
real dashboard.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
# Grafana's unit of a panel: (factor, axis label) of the preview.
SCALE = {"s": (1000, "ms"), "reqps": (1, "per second"), "percentunit": (100, "%"), "bytes": (1 / 2**20, "MiB")}


def query_range(base: str, expr: str, start: float, end: float, step: float) -> list[dict]:
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen("%s/api/v1/query_range?%s" % (base, params), timeout=30) as r:
        data = json.load(r)
    return data["data"]["result"]


def main(argv=None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ap = argparse.ArgumentParser()
    ap.add_argument("--prometheus", default="http://127.0.0.1:9090")
    ap.add_argument("--dashboard", default=os.path.join(HERE, "dashboards", "system1-omni.json"))
    ap.add_argument("--minutes", type=float, default=5)
    ap.add_argument("--rate-interval", default="30s")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    with open(args.dashboard, encoding="utf-8") as f:
        dash = json.load(f)
    end = time.time()
    start = end - args.minutes * 60
    step = max(2.0, args.minutes * 60 / 300)
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dash["panels"])
    every = {v["name"]: v.get("allValue", ".*") for v in dash.get("templating", {}).get("list", [])}
    plt.style.use("dark_background")
    fig = plt.figure(figsize=(20, rows * 0.55))
    grid = fig.add_gridspec(rows, 24, hspace=2.2, wspace=3)
    for panel in dash["panels"]:
        g = panel["gridPos"]
        ax = fig.add_subplot(grid[g["y"] : g["y"] + g["h"], g["x"] : g["x"] + g["w"]])
        ax.set_title(panel["title"], fontsize=10, loc="left")
        ax.set_facecolor("#181b1f")
        unit = panel["fieldConfig"]["defaults"].get("unit", "")
        drawn = 0
        for target in panel["targets"]:
            expr = target["expr"].replace("$__rate_interval", args.rate_interval)
            for name, value in every.items():  # template variables at "All"
                expr = expr.replace("$" + name, value)
            for series in query_range(args.prometheus, expr, start, end, step):
                xs = [(float(t) - end) / 60 for t, v in series["values"]]
                ys = [float(v) * SCALE.get(unit, (1, ""))[0] for t, v in series["values"]]
                metric = series["metric"]
                label = re.sub(
                    r"\{\{(\w+)\}\}", lambda m, metric=metric: metric.get(m.group(1), ""), target["legendFormat"]
                )
                ax.plot(xs, ys, linewidth=1.2, label=label)
                drawn += 1
        ax.set_xlabel("minutes", fontsize=7)
        ax.set_ylabel(SCALE.get(unit, (1, ""))[1], fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.2)
        if drawn:
            ax.legend(fontsize=6, loc="upper left")
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, alpha=0.5)
    fig.suptitle(
        "%s — preview from Prometheus, last %g min" % (dash["title"], args.minutes), fontsize=12, x=0.01, ha="left"
    )
    fig.savefig(args.out, dpi=80, bbox_inches="tight")
    print(args.out)


if __name__ == "__main__":
    main()
