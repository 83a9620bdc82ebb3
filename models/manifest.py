"""The manifest written next to every export: what was exported, from what, and how.

`manifest.json` names the family (which package loads it), the served name and aliases, the
checkpoint and revision, dims, calibration, limits, and SHA-256 of the sources and outputs. An
export whose sources and exporter version match the manifest is up to date and is skipped.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any

MANIFEST = "manifest.json"
# Bump when the exported graph or manifest changes meaning: older exports are redone.
EXPORTER_VERSION = "1"


def sha256_file(path: str, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(chunk)
            if not block:
                break
            h.update(block)
    return h.hexdigest()


def hash_files(root: str, names: list[str]) -> dict[str, str]:
    return {name: sha256_file(os.path.join(root, name)) for name in names
            if os.path.exists(os.path.join(root, name))}


def read(directory: str) -> dict[str, Any]:
    path = os.path.join(directory, MANIFEST)
    if not os.path.exists(path):
        raise FileNotFoundError(
            "%s has no %s: it is not an exported model directory (run `python -m models.export`)"
            % (directory, MANIFEST))
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write(directory: str, manifest: dict[str, Any]) -> None:
    tmp = os.path.join(directory, MANIFEST + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, ensure_ascii=False)
    os.replace(tmp, os.path.join(directory, MANIFEST))


def up_to_date(directory: str, family: str, sources: dict[str, str], options: dict[str, Any]) -> bool:
    """Whether `directory` already holds this export of these sources with these options."""
    try:
        old = read(directory)
    except (FileNotFoundError, ValueError):
        return False
    if (old.get("family") != family or old.get("exporter", {}).get("version") != EXPORTER_VERSION
            or old.get("source", {}).get("sha256") != sources or old.get("export_options") != options):
        return False
    outputs = old.get("files", {})
    return bool(outputs) and all(os.path.exists(os.path.join(directory, n)) for n in outputs)
