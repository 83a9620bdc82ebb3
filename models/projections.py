"""Packed projections read part by part (export-time only: needs torch).

A Linear whose output is several projections side by side (ModernBERT's Wqkv, a merged Qwen3.5
gate+up) can run as one matrix product and a split, or as one product per part over a slice of
its weight rows. Exported, the slices are constants that ONNX Runtime folds at load: no split
kernel runs, at the price of more, narrower products. On the H200 ONNX Runtime's split kernel
cost more than the extra launches for Laya (docs/benchmarks.md, "evening").
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn
from torch.nn import functional as F


def rows(linear: nn.Linear, x: torch.Tensor, start: int, stop: int,
         order: torch.Tensor | None = None) -> torch.Tensor:
    """Outputs start..stop of `linear`, from a slice of its weight rows (and bias); `order`, an
    index into the slice, permutes them (a constant gather that ONNX Runtime also folds)."""
    weight = linear.weight[start:stop]
    bias = linear.bias[start:stop] if linear.bias is not None else None
    if order is not None:
        weight, bias = weight[order], (bias[order] if bias is not None else None)
    return F.linear(x, weight, bias)


def parts(linear: nn.Linear, x: torch.Tensor, sizes: Sequence[int], separate: bool) -> list[torch.Tensor]:
    """`linear`'s output cut into `sizes` along the last axis: one product and a split, or
    (`separate`) one product per part."""
    if not separate:
        return list(torch.split(linear(x), list(sizes), dim=-1))
    out, start = [], 0
    for size in sizes:
        out.append(rows(linear, x, start, start + size))
        start += size
    return out
