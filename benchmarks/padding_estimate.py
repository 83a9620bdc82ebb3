"""How the row adapter packs the Open-Jev noul mix at c=16, and what that costs the GPU by a
linear cost model fitted to measured passes (a calibrated estimate, not a measurement).

    python -m benchmarks.padding_estimate [--fixed-ms 6.2 --per-token-us 32]

The mix's lengths are the ones benchmarks/make_workloads.py gives open_jev_noul.jsonl (48
requests, log-uniform over 80-3,399 tokens, in its shuffled order), taken 16 at a time as a c=16
closed loop first fills the queue. Default cost: 6.2 ms + 32 µs per padded token per forward pass,
the line through the 9B graph's in-process one-row passes at 218 and 1,000 tokens (13.2 and 38.2 ms,
benchmarks/results/2026-11-29-h200-open-jev-fused). Against the one HTTP measurement it can be held
to: one length band per batch, as the adapter packed then, predicts ~1,050-1,080 ms a 16-request
batch and 15 req/s; the server measured 973-1,044 ms `infer` and 14.7-15.6 req/s.
"""
from __future__ import annotations

import argparse
import math
import random

from models.qwen35.rows import LastTokenAdapter


def noul_mix_lengths(n: int = 48, low: int = 80, high: int = 3399, seed: int = 7) -> list[int]:
    from benchmarks.make_workloads import TICKETS

    rng = random.Random(seed)
    for _ in range(900):                 # make_workloads draws the filler text first
        rng.choice(TICKETS)
    lengths = [round(math.exp(math.log(low) + (math.log(high) - math.log(low)) * i / (n - 1))) for i in range(n)]
    rng.shuffle(lengths)
    return lengths


def estimate(lengths: list[int], max_row_padding: int, fixed_ms: float, per_token_us: float, batch: int = 16):
    adapter = LastTokenAdapter(0, "k", max_row_padding=max_row_padding)
    passes, padded, real, ms = 0, 0, 0, 0.0
    for i in range(0, len(lengths), batch):
        packed = adapter.pack([[[1] * n] for n in lengths[i:i + batch]])
        passes += len(packed.parts)
        padded += packed.padded_tokens
        real += packed.real_tokens
        ms += sum(fixed_ms + per_token_us / 1e3 * p["input_ids"].size for p in packed.parts)
    return {"passes": passes, "padded_over_real": padded / real, "gpu_ms": ms, "req_per_s": len(lengths) / ms * 1e3}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixed-ms", type=float, default=6.2)
    ap.add_argument("--per-token-us", type=float, default=32.0)
    args = ap.parse_args(argv)
    lengths = noul_mix_lengths()
    for label, pad, batch in (("one length band (before)", 1 << 30, 16), ("bands of <= 256 pads (now)", 256, 16),
                              ("one request per pass", 256, 1)):
        r = estimate(lengths, pad, args.fixed_ms, args.per_token_us, batch)
        print("%-28s passes %3d  padded/real %.2f  GPU %6.0f ms for %d requests  %5.1f req/s"
              % (label, r["passes"], r["padded_over_real"], r["gpu_ms"], len(lengths), r["req_per_s"]))


if __name__ == "__main__":
    main()
