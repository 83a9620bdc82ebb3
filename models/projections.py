"""A packed projection read part by part (export-time only: needs torch).

A Linear whose output is several projections side by side (ModernBERT's Wqkv and Wi, the
Qwen3.5 backbone's stacked projections) can run as one matrix product and a split, or as one
product per part over a slice of its weight rows. Exported, the slices are constants folded into
the weights (models/fold.py): no split kernel runs, at the price of more, narrower products,
which is the cheaper of the two on the GPU.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F


def rows(linear: nn.Linear, x: torch.Tensor, start: int, stop: int, order: torch.Tensor | None = None) -> torch.Tensor:
    """Outputs start..stop of `linear`, from a slice of its weight rows (and bias); `order`, an
    index into the slice, permutes them (a constant gather, folded too)."""
    weight = linear.weight[start:stop]
    bias = linear.bias[start:stop] if linear.bias is not None else None
    if order is not None:
        weight, bias = weight[order], (bias[order] if bias is not None else None)
    return F.linear(x, weight, bias)


def parts(linear: nn.Linear, x: torch.Tensor, sizes: Sequence[int]) -> list[torch.Tensor]:
    """`linear`'s output cut into `sizes` along the last axis, one product per part."""
    out, start = [], 0
    for size in sizes:
        out.append(rows(linear, x, start, start + size))
        start += size
    return out
