"""Laya (english, multilingual, typed-decisions): ModernBERT encoder + typed decision head."""

from __future__ import annotations

from models.laya.checkpoint import FAMILY


def load(directory: str, manifest: dict):
    from models.laya.served import LayaModel

    return LayaModel(directory, manifest)


__all__ = ["FAMILY", "load"]
