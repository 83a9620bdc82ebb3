"""Open-Jev's scalar head, `head.pt` in the upstream package, read at export (torch reads it):
checked, then carried in the merged export's metadata (checkpoint.MergedExport).

    load_head(package, hidden_size=None)              -> (weight float32[H], bias float)
    export_metadata(package, max_length=4096, ...)    -> MergedExport
"""

from __future__ import annotations

import numpy as np
import torch

from models.open_jev import checkpoint as ck


def load_head(package: ck.Package, hidden_size: int | None = None) -> tuple[np.ndarray, float]:
    """`head.pt` {"weight": (1, H), "bias": (1,)} as (float32 weight[H], bias), checked finite.

    `hidden_size` defaults to the variant's; random test packages pass their own.
    """
    head = torch.load(package.head_path, map_location="cpu", weights_only=True)
    if not isinstance(head, dict) or not {"weight", "bias"} <= set(head):
        raise ValueError('%s must hold {"weight", "bias"}' % package.head_path)
    weight, bias = head["weight"].float(), head["bias"].float()
    width = hidden_size or package.variant.hidden_size
    if tuple(weight.shape) != (1, width) or tuple(bias.shape) != (1,):
        raise ValueError(
            "%s: expected weight (1, %d) and bias (1,), got %s and %s"
            % (package.head_path, width, tuple(weight.shape), tuple(bias.shape))
        )
    if not bool(torch.isfinite(weight).all()) or not bool(torch.isfinite(bias).all()):
        raise ValueError("%s: non-finite scalar head" % package.head_path)
    return weight.reshape(-1).numpy().astype(np.float32), float(bias.item())


def export_metadata(
    package: ck.Package,
    max_length: int = ck.MAX_LENGTH_DEFAULT,
    *,
    chat_prefix: str = ck.CHAT_PREFIX,
    chat_suffix: str = ck.CHAT_SUFFIX,
    checkpoint_revision: str | None = None,
    hidden_size: int | None = None,
) -> ck.MergedExport:
    """The metadata of a merged export of `package` (reads head.pt, so needs torch).

    `checkpoint_revision` defaults to the variant's pinned upstream commit.
    """
    weight, bias = load_head(package, hidden_size)
    return ck.MergedExport(
        model_id=package.model_id,
        base_revision=package.base_revision,
        checkpoint_revision=checkpoint_revision or package.variant.revision,
        temperature=package.temperature,
        max_length=ck.check_max_length(max_length),
        chat_prefix=chat_prefix,
        chat_suffix=chat_suffix,
        head_weight=weight,
        head_bias=bias,
    )
