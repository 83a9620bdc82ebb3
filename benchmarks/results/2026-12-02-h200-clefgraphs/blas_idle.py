"""Cua-S1's host readout (float64 [1,2560] x [2560,26], models/cua_s1/finish.letter_logits) after
an idle gap like a c=1 request's wait for its pass, in whatever BLAS threading this process has:
run it with and without OPENBLAS_NUM_THREADS=1 (and OMP_NUM_THREADS=1)."""
import os
import statistics
import sys
import time

import numpy as np

gap = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0065
h = np.random.default_rng(0).standard_normal((1, 2560)).astype(np.float32)
w = np.random.default_rng(1).standard_normal((26, 2560))
times = []
for i in range(400):
    time.sleep(gap)
    t0 = time.perf_counter()
    (h.astype(np.float64) @ w.T).astype(np.float32)
    times.append((time.perf_counter() - t0) * 1e6)
warm = []
for i in range(400):
    t0 = time.perf_counter()
    (h.astype(np.float64) @ w.T).astype(np.float32)
    warm.append((time.perf_counter() - t0) * 1e6)
cfg = np.__config__.CONFIG["Build Dependencies"]["blas"] if hasattr(np.__config__, "CONFIG") else "?"
print("threads env %s/%s blas %s: after a %.1f ms gap p50 %.1f us p90 %.1f; back to back p50 %.1f us"
      % (os.environ.get("OPENBLAS_NUM_THREADS", "-"), os.environ.get("OMP_NUM_THREADS", "-"),
         cfg.get("name") if isinstance(cfg, dict) else cfg, gap * 1e3, statistics.median(times),
         sorted(times)[int(0.9 * len(times))], statistics.median(warm)))
