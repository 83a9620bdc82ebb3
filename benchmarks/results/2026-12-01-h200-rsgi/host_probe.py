"""The host side of one Cua-S1 request, in-process on the GPU machine's CPU: preparation (the
tiny export's tokenizer, as small a vocabulary as the full-size random checkpoints') and finishing
with full-size letter rows (26 x 2560). Run once as is and once with OPENBLAS_NUM_THREADS=1."""
import json
import os
import statistics
import sys
import time

import numpy as np

from models.cua_s1 import finish as finishing
from models.registry import load

model = load(sys.argv[1])
bodies = [json.loads(line) for line in open("benchmarks/workloads/cua_218.jsonl")]


def timed(fn, n=400, gap=0.0):
    out = []
    for i in range(n):
        if gap:
            time.sleep(gap)            # as at c=1: idle between requests
        t0 = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(out)


rng = np.random.default_rng(0)
rows64 = rng.standard_normal((26, 2560)).astype(np.float32).astype(np.float64)
hidden = rng.standard_normal((1, 2560)).astype(np.float16)
prepared = model.prepare(bodies[0])
print("OPENBLAS_NUM_THREADS=%s cores=%s" % (os.environ.get("OPENBLAS_NUM_THREADS"), os.cpu_count()))
for gap in (0.0, 0.002):
    print("gap %.3f s: prepare_many %.1f us, letter_logits %.1f us, finish_hidden %.1f us" % (
        gap, timed(lambda i: model.prepare_many([bodies[i % len(bodies)]]), gap=gap),
        timed(lambda i: finishing.letter_logits(hidden, rows64), gap=gap),
        timed(lambda i: finishing.finish_hidden(prepared.context, hidden, rows64), gap=gap)))
