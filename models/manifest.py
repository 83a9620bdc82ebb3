"""The manifest written next to every export: what was exported, from what, and how.

`manifest.json` names the family (which package loads it), the served name and aliases, the
checkpoint and revision, dims, calibration, limits, and SHA-256 of the sources and outputs. The
server reads it (`read`); an exporter writes it through models/export_dir.py. A directory the
export service publishes to holds versions and a `current` link to one (models/publish.py): the
server loads the export `resolve` names.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

MANIFEST = "manifest.json"
# The link a publish directory names its served version by (models/publish.py).
CURRENT = "current"
# Bump when the exported graph or manifest changes meaning: older exports are redone.
EXPORTER_VERSION = "2"


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
    return {name: sha256_file(os.path.join(root, name)) for name in names if os.path.exists(os.path.join(root, name))}


def resolve(directory: str) -> str:
    """The export `directory` serves: the version its `current` link names, resolved now and once
    (a later publish moves the link, never what a loaded server reads), else `directory` itself,
    a plain export."""
    link = os.path.join(directory, CURRENT)
    return os.path.realpath(link) if os.path.islink(link) else directory


def read(directory: str) -> dict[str, Any]:
    path = os.path.join(directory, MANIFEST)
    if not os.path.exists(path):
        raise FileNotFoundError(
            "%s has no %s: it is not an exported model directory (run `python -m models.export`)"
            % (directory, MANIFEST)
        )
    with open(path, encoding="utf-8") as f:
        manifest: dict[str, Any] = json.load(f)
    return manifest


def write(directory: str, manifest: dict[str, Any]) -> None:
    tmp = os.path.join(directory, MANIFEST + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, ensure_ascii=False)
    os.replace(tmp, os.path.join(directory, MANIFEST))
