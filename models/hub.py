"""Find a checkpoint: a local directory, or a Hugging Face repo id downloaded with huggingface_hub.

`owner/name` may carry a subfolder (`convaiinnovations/laya/multilingual`), as Laya's bundle
does. Downloads fetch only the files a model needs. Offline, or without access, the error says
what was tried and how to proceed instead of a bare network traceback.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass


class CheckpointUnavailable(RuntimeError):
    pass


@dataclass
class ResolvedCheckpoint:
    path: str  # local directory holding the checkpoint files
    source: str  # what the user named: a repo id (with subfolder) or a path
    repo: str | None
    revision: str | None  # the commit, when known

    @property
    def name(self) -> str:
        """How manifests, health and answers name it: a local checkpoint by its folder only,
        so no path on the exporting machine is ever shown."""
        return self.source if self.repo else "local:" + os.path.basename(os.path.normpath(self.path))


_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+(/[\w./-]+)?$")


def _snapshot_revision(path: str) -> str | None:
    """The commit a Hugging Face cache snapshot directory points at."""
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
    if "snapshots" in parts:
        i = parts.index("snapshots")
        if i + 1 < len(parts) and re.fullmatch(r"[0-9a-f]{40}", parts[i + 1]):
            return parts[i + 1]
    return None


def resolve(
    checkpoint: str,
    files: list[str],
    revision: str | None = None,
    subfolder: str | None = None,
    token: str | None = None,
) -> ResolvedCheckpoint:
    """Local directory as is; otherwise download `files` (glob patterns) of the repo."""
    if os.path.isdir(checkpoint):
        path = os.path.join(checkpoint, subfolder) if subfolder else checkpoint
        if not os.path.isdir(path):
            raise CheckpointUnavailable("subfolder %r not found in %s" % (subfolder, checkpoint))
        return ResolvedCheckpoint(os.path.abspath(path), checkpoint, None, _snapshot_revision(path))
    if checkpoint.startswith(("/", "./", "../", "~")) or not _REPO.match(checkpoint):
        raise CheckpointUnavailable(
            "checkpoint %r is neither a local directory nor a Hugging Face repo id "
            "(owner/name[/subfolder])" % checkpoint
        )
    owner, name, *rest = checkpoint.split("/")
    repo = "%s/%s" % (owner, name)
    sub = "/".join(rest) or subfolder
    prefix = sub + "/" if sub else ""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError
    except ImportError as exc:  # pragma: no cover - huggingface_hub is a runtime dependency
        raise CheckpointUnavailable("huggingface_hub is not installed") from exc
    try:
        root = snapshot_download(
            repo,
            revision=revision,
            token=token or os.environ.get("HF_TOKEN") or None,
            allow_patterns=[prefix + f for f in files],
        )
    except LocalEntryNotFoundError as exc:
        raise CheckpointUnavailable(
            "cannot download %s%s: the Hugging Face Hub is unreachable (offline, or "
            "HF_HUB_OFFLINE=1) and it is not in the local cache (%s). Download it where the Hub "
            "is reachable, or pass the checkpoint's local directory instead."
            % (repo, "@" + revision if revision else "", os.environ.get("HF_HOME", "~/.cache/huggingface"))
        ) from exc
    except HfHubHTTPError as exc:
        raise CheckpointUnavailable(
            "cannot download %s: %s. A gated or private repo needs HF_TOKEN." % (repo, exc)
        ) from exc
    except (OSError, ValueError) as exc:
        raise CheckpointUnavailable("cannot download %s: %s" % (repo, exc)) from exc
    path = os.path.join(root, sub) if sub else root
    if not os.path.isdir(path):
        raise CheckpointUnavailable("%s has no folder %r at this revision" % (repo, sub))
    return ResolvedCheckpoint(
        path, checkpoint if not subfolder else "%s/%s" % (repo, sub), repo, _snapshot_revision(root) or revision
    )
