"""Versioned exports, published atomically (`python -m models.export ... --publish DIR`).

Each export goes to DIR/<version>/, where <version> names what it is made of: the checkpoint's
commit (a Hub checkpoint) or a hash of its files (a local directory), the exporter version
(models/manifest.EXPORTER_VERSION) and a hash of the export's options. It is written into a hidden
sibling (DIR/.partial-*), renamed to DIR/<version> once its manifest is written, and then
DIR/current, a symbolic link, is replaced by the rename of a new link. A server resolves `current`
once as it loads (models/manifest.resolve), so it loads a complete export or none, and a server
that loaded an older version keeps serving it while newer servers load the new one.

A version already published is not exported again: `current` is pointed back at it (a rollback
is the export of the older options). One export a directory at a time: a lock file makes a second
wait for the first, and then find its version published. Old versions are pruned to KEEP, never
the one `current` names. Export-time only: the server reads `current`, never this module.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from models import manifest as manifests
from models.hub import CheckpointUnavailable

# Published versions kept in a directory: the one `current` names, the one it replaced (a
# rollback, and older replicas still serving it during a rollout) and one before.
KEEP = 3
PARTIAL = ".partial-"
LOCK = ".lock"
_COMMIT = re.compile(r"[0-9a-f]{40}")


def _tree_hash(path: str) -> str:
    """SHA-256 over a directory's files (relative names and contents), hidden ones left out."""
    h = hashlib.sha256()
    for top, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(f for f in files if not f.startswith(".")):
            full = os.path.join(top, name)
            h.update(os.path.relpath(full, path).encode() + b"\0")
            h.update(manifests.sha256_file(full).encode() + b"\0")
    return h.hexdigest()


def source_identity(checkpoint: str, revision: str | None, subfolder: str | None) -> str:
    """What a checkpoint is, without downloading it: a Hub checkpoint's commit (its revision when
    that is a commit, else the commit the Hub names for it), or a local directory's content hash."""
    if os.path.isdir(checkpoint):
        return "local-" + _tree_hash(os.path.join(checkpoint, subfolder) if subfolder else checkpoint)[:12]
    if revision and _COMMIT.fullmatch(revision):
        return revision[:12]
    repo = "/".join(checkpoint.split("/")[:2])
    try:
        from huggingface_hub import HfApi

        sha = HfApi(token=os.environ.get("HF_TOKEN") or None).model_info(repo, revision=revision).sha
    except Exception as exc:  # offline, private, no such revision: huggingface_hub raises several kinds
        raise CheckpointUnavailable(
            "cannot name the commit of %s%s to version its export (%s); pin it with --revision COMMIT"
            % (repo, "@" + revision if revision else "", exc)
        ) from exc
    if not sha:
        raise CheckpointUnavailable("the Hub names no commit for %s; pin it with --revision COMMIT" % repo)
    return sha[:12]


def version(identity: str, options: dict[str, Any]) -> str:
    """The directory name of an export: checkpoint identity, exporter version, options hash."""
    digest = hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()[:8]
    return "%s-x%s-%s" % (identity, manifests.EXPORTER_VERSION, digest)


def published(directory: str) -> list[str]:
    """The versions published in `directory`, newest first."""
    if not os.path.isdir(directory):
        return []
    found = [
        name
        for name in os.listdir(directory)
        if not name.startswith(".")
        and name != manifests.CURRENT
        and os.path.isfile(os.path.join(directory, name, manifests.MANIFEST))
    ]
    return sorted(found, key=lambda n: os.stat(os.path.join(directory, n)).st_mtime, reverse=True)


def current(directory: str) -> str | None:
    """The version `current` names, or None."""
    link = os.path.join(directory, manifests.CURRENT)
    return os.readlink(link) if os.path.islink(link) else None


@contextlib.contextmanager
def _locked(directory: str) -> Iterator[None]:
    with open(os.path.join(directory, LOCK), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _sync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def point(directory: str, name: str) -> None:
    """Make `current` name `name` by renaming a new link over it: never absent, never half-made."""
    link = os.path.join(directory, ".current-%d" % os.getpid())
    with contextlib.suppress(FileNotFoundError):
        os.unlink(link)
    os.symlink(name, link)
    os.replace(link, os.path.join(directory, manifests.CURRENT))
    _sync(directory)


def prune(directory: str, keep: int = KEEP) -> list[str]:
    """Remove published versions past the `keep` newest, never the one `current` names."""
    pointed = current(directory)
    versions = published(directory)
    kept = ([pointed] if pointed in versions else []) + [v for v in versions if v != pointed]
    gone = kept[keep:]
    for name in gone:
        shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
    return gone


def publish(
    directory: str, name: str, export: Callable[[str], Any], progress: Callable[[str], None] | None = None
) -> str:
    """Export version `name` into `directory` with `export(scratch_dir)` unless it is published
    already, point `current` at it and prune: the path of the version served from now on."""
    log = progress or (lambda msg: None)
    os.makedirs(directory, exist_ok=True)
    target = os.path.join(directory, name)
    with _locked(directory):
        if os.path.isfile(os.path.join(target, manifests.MANIFEST)):
            log("published already: %s" % target)
        else:
            # Holding the lock, any partial export is one a killed export left.
            for stale in os.listdir(directory):
                if stale.startswith(PARTIAL):
                    shutil.rmtree(os.path.join(directory, stale), ignore_errors=True)
            scratch = tempfile.mkdtemp(prefix=PARTIAL + name + "-", dir=directory)
            os.chmod(scratch, 0o755)
            try:
                export(scratch)
            except BaseException:
                shutil.rmtree(scratch, ignore_errors=True)
                raise
            if not os.path.isfile(os.path.join(scratch, manifests.MANIFEST)):
                raise RuntimeError("the export into %s wrote no %s" % (scratch, manifests.MANIFEST))
            _sync(scratch)
            shutil.rmtree(target, ignore_errors=True)  # a version pruned half-way, never a complete one
            os.rename(scratch, target)
            log("published: %s" % target)
        if current(directory) != name:
            point(directory, name)
            log("current: %s" % name)
        os.utime(target)  # the newest for prune: the one served last
        for gone in prune(directory):
            log("pruned: %s" % os.path.join(directory, gone))
    return target
