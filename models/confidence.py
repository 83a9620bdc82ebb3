"""Jev's answer confidences, the same for every model: the hosted Jev API's choice and score
confidences computed from an answer's probabilities (in option order)."""

from __future__ import annotations

from collections.abc import Sequence


def jev_choice(p: Sequence[float]) -> float:
    """(p_max − 1/n) / (1 − 1/n): 0 for a uniform answer, 1 for a certain one; 1 when n = 1."""
    n = len(p)
    return 1.0 if n == 1 else (max(p) - 1.0 / n) / (1.0 - 1.0 / n)


def jev_score(p: Sequence[float]) -> float:
    """1 − Σ p_i·|i − k| / D floored at 0, with k the most probable level (the first of equals)
    and D the mean distance of the levels from their centre; 1 when n = 1."""
    n = len(p)
    if n == 1:
        return 1.0
    k = max(range(n), key=p.__getitem__)
    spread = sum(abs(i - (n - 1) / 2) for i in range(n)) / n
    return max(0.0, 1.0 - sum(v * abs(i - k) for i, v in enumerate(p)) / spread)


def jev(kind: str, p: Sequence[float]) -> float:
    """The confidence of a `choice` or `score` answer."""
    return jev_choice(p) if kind == "choice" else jev_score(p)
