"""The reduced-precision parity gate (issue 5): a half-precision export may serve only if, on the
same inputs as its float32 reference, every option distribution keeps its top choice where the
fp32 top-two margin is at least 0.05 and no probability moves by more than 0.02."""
from __future__ import annotations

from typing import Sequence

import numpy as np

MARGIN = 0.05
MAX_DRIFT = 0.02


def softmax(logits) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    z = np.exp(z - z.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


def gate_rows(probs: Sequence[np.ndarray], reference: Sequence[np.ndarray]) -> dict:
    """One distribution per row (rows may have different option counts): the gate's measures."""
    drift, same, gated = 0.0, 0, 0
    for p, r in zip(probs, reference):
        p, r = np.asarray(p, dtype=np.float64), np.asarray(r, dtype=np.float64)
        drift = max(drift, float(np.abs(p - r).max()))
        top = np.sort(r)[::-1]
        if len(top) < 2 or top[0] - top[1] >= MARGIN:
            gated += 1
            same += int(p.argmax() == r.argmax())
    return {"rows": len(probs), "max_prob_drift": drift, "top_choice_identical": "%d/%d" % (same, gated),
            "passes": drift <= MAX_DRIFT and same == gated}
