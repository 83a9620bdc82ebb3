"""The host a benchmark ran on, written beside its results. The same code serves Laya at 3,365-4,469
decisions/s at c=64 on one of the GPU machine's hosts and at 5,776-6,161 on another
(docs/benchmarks.md), so a figure needs its host: the CPU, how much of it the hypervisor took
(steal) and how busy it was, how fast it runs a fixed piece of Python, and the GPU's clocks.

    python -m benchmarks.host_facts [--out host.json] [--window-s 1.0]

The Python probe runs through the window while /proc/stat is read at both ends: `steal_pct` and
`busy_pct` are shares of every core's time over it (the probe's own core counts in `busy_pct`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from importlib import metadata
import contextlib

# Kept as strings: one per line of `nvidia-smi --query-gpu`, in this order.
GPU_FIELDS = (
    "name",
    "driver_version",
    "pstate",
    "clocks.sm",
    "clocks.max.sm",
    "clocks.mem",
    "clocks.max.mem",
    "power.draw",
    "power.limit",
    "temperature.gpu",
    "persistence_mode",
    "memory.total",
    "memory.used",
)
PACKAGES = (
    "onnxruntime-gpu",
    "onnxruntime",
    "numpy",
    "granian",
    "litestar",
    "msgspec",
    "tokenizers",
    "uvloop",
    "torch",
    "transformers",
)
# /proc/stat's cpu line, after the label: user nice system idle iowait irq softirq steal guest guest_nice.
_IDLE, _IOWAIT, _STEAL = 3, 4, 7


def cpu_times(stat_text: str) -> list[int]:
    """The aggregate `cpu` line of /proc/stat as integers (guest time is already inside user)."""
    for line in stat_text.splitlines():
        if line.startswith("cpu "):
            return [int(v) for v in line.split()[1:9]]
    raise ValueError("no aggregate cpu line in /proc/stat")


def read_cpu_times(path: str = "/proc/stat") -> list[int]:
    """`cpu_times` of this host now."""
    with open(path, encoding="utf-8") as f:
        return cpu_times(f.read())


def shares(before: list[int], after: list[int]) -> dict[str, float]:
    """Steal and busy time as percentages of all cores' time between two `cpu_times` readings."""
    delta = [b - a for a, b in zip(before, after)]
    total = sum(delta)
    if total <= 0:
        return {"steal_pct": 0.0, "busy_pct": 0.0}
    idle = delta[_IDLE] + delta[_IOWAIT]
    return {
        "steal_pct": round(100.0 * delta[_STEAL] / total, 2),
        "busy_pct": round(100.0 * (total - idle - delta[_STEAL]) / total, 2),
    }


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def cpu_facts(cpuinfo: str) -> dict:
    """Model, flags that matter here and the clock from /proc/cpuinfo, plus cpufreq/cpuidle state."""
    models, mhz, flags = [], [], ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name":
            models.append(value)
        elif key == "cpu MHz":
            mhz.append(float(value))
        elif key == "flags" and not flags:
            flags = value
    return {
        "model": models[0] if models else platform.processor() or None,
        "logical_cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "mhz_mean": round(statistics.fmean(mhz), 1) if mhz else None,
        "hypervisor": "hypervisor" in flags.split(),
        # None where the file is missing: a VM without a cpuidle driver cannot hold its cores awake,
        # so that absence is itself a fact about the host.
        "governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "cpuidle_driver": _read("/sys/devices/system/cpu/cpuidle/current_driver"),
    }


def python_probe(window_s: float) -> dict:
    """Median µs of two fixed pieces of Python, repeated through `window_s`: a request body's JSON
    round trip (the server's own host work is mostly such small steps) and an integer loop."""
    body = {
        "model": "english",
        "state": "The customer writes: my order arrived broken, " * 4,
        "questions": {
            "refund": {"type": "noul", "instructions": "Should we refund?"},
            "tone": {"type": "choice", "criteria": ["calm", "angry", "neutral"]},
        },
    }
    text = json.dumps(body)
    json_us, loop_us = [], []
    end = time.perf_counter() + window_s
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        for _ in range(20):
            json.dumps(json.loads(text))
        t1 = time.perf_counter()
        total = 0
        for i in range(2000):
            total += i * i
        t2 = time.perf_counter()
        json_us.append((t1 - t0) / 20 * 1e6)
        loop_us.append((t2 - t1) * 1e6)
    return {
        "json_roundtrip_us": round(statistics.median(json_us), 2),
        "int_loop_2000_us": round(statistics.median(loop_us), 2),
        "samples": len(json_us),
    }


def gpu_facts() -> list[dict] | dict:
    """One dict a GPU from nvidia-smi, or {"absent": why}."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {"absent": "no nvidia-smi on PATH"}
    try:
        out = subprocess.run(
            [exe, "--query-gpu=" + ",".join(GPU_FIELDS), "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return {"absent": "nvidia-smi failed: %s" % e}
    return [dict(zip(GPU_FIELDS, (v.strip() for v in line.split(",")))) for line in out.splitlines() if line.strip()]


def versions() -> dict:
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[name] = metadata.version(name)
    if "onnxruntime-gpu" not in found and "onnxruntime" not in found:
        # The GPU machine's onnxruntime-gpu is unpacked onto PYTHONPATH, without its metadata.
        try:
            import onnxruntime

            found["onnxruntime"] = onnxruntime.__version__
        except ImportError:
            pass
    return found


def facts(window_s: float = 1.0) -> dict:
    before = read_cpu_times()
    probe = python_probe(window_s)
    after = read_cpu_times()
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        cpu = cpu_facts(f.read())
    meminfo = dict(line.split(":", 1) for line in (_read("/proc/meminfo") or "").splitlines() if ":" in line)
    return {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "hostname": platform.node(),
        "kernel": platform.release(),
        "cpu": cpu,
        "load_avg": list(os.getloadavg()),
        "window": dict(shares(before, after), seconds=window_s),
        "python_probe": probe,
        "mem_total_kb": int(meminfo["MemTotal"].split()[0]) if "MemTotal" in meminfo else None,
        "mem_available_kb": int(meminfo["MemAvailable"].split()[0]) if "MemAvailable" in meminfo else None,
        "gpus": gpu_facts(),
        "versions": versions(),
    }


def summary(f: dict) -> str:
    """One line for a run's log."""
    gpus = f["gpus"]
    gpu = (
        "%s, SM %s of %s" % (gpus[0]["name"], gpus[0]["clocks.sm"], gpus[0]["clocks.max.sm"])
        if isinstance(gpus, list) and gpus
        else "no GPU"
    )
    return (
        "host: %s, %s cores (%s usable), %s MHz; steal %.1f%%, busy %.1f%% over %.1f s; JSON round trip %.1f µs, "
        "int loop %.1f µs; %s"
        % (
            f["cpu"]["model"],
            f["cpu"]["logical_cores"],
            f["cpu"]["usable_cores"],
            f["cpu"]["mhz_mean"],
            f["window"]["steal_pct"],
            f["window"]["busy_pct"],
            f["window"]["seconds"],
            f["python_probe"]["json_roundtrip_us"],
            f["python_probe"]["int_loop_2000_us"],
            gpu,
        )
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the facts as JSON here (default: print them)")
    ap.add_argument("--window-s", type=float, default=1.0, help="how long the Python probe and steal window run")
    args = ap.parse_args(argv)
    found = facts(args.window_s)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(found, f, indent=2)
    else:
        json.dump(found, sys.stdout, indent=2)
        print()
    print(summary(found), file=sys.stderr if not args.out else sys.stdout)


if __name__ == "__main__":
    main()
