"""Clef-Flash (`Cloudflare/clef-flash`): a Qwen3.5-9B backbone read by a joint schema head that
answers every question of a request in one record (models.md §5).

prepare (request → one record), finish (logits → answers), head_graph (the head as an
export-friendly torch module), random_checkpoint (tiny published-layout checkpoints for tests).
"""

from __future__ import annotations

FAMILY = "clef_flash"  # the manifest's family (models.registry)

__all__ = ["FAMILY"]
