"""GPU-side kernel times of whatever a process launches, ONNX Runtime's kernels included."""

from __future__ import annotations

import re

# What a kernel does, from its name, first match wins: cuBLAS's and CUTLASS's products, the
# attention kernels (cutlass's memory-efficient FMHA, flash, the unfused softmax), the norms,
# the rotary embedding, data movement, and everything else elementwise (GELU, adds, casts).
KINDS = (
    ("attention", re.compile(r"fmha|flash|attention|attn|softmax", re.I)),
    ("matmul", re.compile(r"gemm|nvjet|xmma|s16816|s1688|cublas|matmul|splitkreduce", re.I)),
    ("norm", re.compile(r"layernorm|rmsnorm|layer_norm", re.I)),
    ("rotary", re.compile(r"rotary", re.I)),
    ("layout", re.compile(r"transpose|split|concat|copy|gather|slice|expand|pad|scatter", re.I)),
)


def kernel_kind(name: str) -> str:
    """The KINDS entry a kernel's name matches, else "elementwise"."""
    return next((kind for kind, pattern in KINDS if pattern.search(name)), "elementwise")


def by_kind(kernels: list[tuple[str, float, int]]) -> dict[str, float]:
    """GPU milliseconds per kernel kind over (name, ms, count) entries, largest first."""
    out: dict[str, float] = {}
    for name, ms, _ in kernels:
        kind = kernel_kind(name)
        out[kind] = out.get(kind, 0.0) + ms
    return {k: round(v, 3) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


def gpu_kernel_times(run, iters: int = 5, top: int = 25) -> dict:
    """Device time per CUDA kernel over `iters` calls of `run`, from CUPTI through torch.profiler,
    which records every kernel the process launches, ONNX Runtime's included. ONNX Runtime's own
    profiler times kernels on the host (launch cost, not GPU time); this is the GPU's side."""
    import time

    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    run()
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(iters):
            run()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / iters
    kernels = [
        (e.key, e.device_time_total / iters / 1e3, e.count // iters)
        for e in prof.key_averages()
        if e.device_time_total > 0
    ]
    kernels.sort(key=lambda k: -k[1])
    busy = sum(k[1] for k in kernels)
    return {
        "wall_ms": round(wall * 1e3, 3),
        "gpu_busy_ms": round(busy, 3),
        "kernels_per_call": sum(k[2] for k in kernels),
        "by_kind_ms": by_kind(kernels),
        "top": [(name[:90], round(ms, 3), n) for name, ms, n in kernels[:top]],
    }
