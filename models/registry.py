"""Exported model directory → served model, by the family its manifest names."""

from __future__ import annotations

import importlib
from typing import cast

from models import manifest as manifests
from models.base import ServedModel

FAMILIES = {
    "laya": "models.laya",
    "cua_s1": "models.cua_s1.served",
    "open_jev": "models.open_jev.served",
    "clef_flash": "models.clef_flash.served",
}


def load(directory: str) -> ServedModel:
    """The served model for one export directory, or the version a publish directory's `current`
    names (no sessions yet: the executor makes those)."""
    directory = manifests.resolve(directory)
    meta = manifests.read(directory)
    family = meta.get("family")
    if family not in FAMILIES:
        raise ValueError("%s: unknown model family %r (known: %s)" % (directory, family, ", ".join(FAMILIES)))
    return cast(ServedModel, importlib.import_module(FAMILIES[family]).load(directory, meta))
