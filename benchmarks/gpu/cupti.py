"""GPU-side kernel times of whatever a process launches, ONNX Runtime's kernels included."""

from __future__ import annotations


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
        "top": [(name[:90], round(ms, 3), n) for name, ms, n in kernels[:top]],
    }
