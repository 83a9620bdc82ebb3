"""Open-Jev fixtures: the tiny locally trained Qwen-style tokenizer, a tiny random package, and merged-export settings
whose head is the identity on a 1-wide hidden state (so a hidden row *is* its score)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from models.open_jev.checkpoint import CHAT_PREFIX, CHAT_SUFFIX, VARIANTS, MergedExport


def make_export(
    variant: str = "27b-v1.1",
    *,
    max_length: int = 4096,
    weight=(1.0,),
    bias: float = 0.0,
    temperature: float | None = None,
) -> MergedExport:
    v = VARIANTS[variant]
    return MergedExport(
        model_id=v.model_id,
        base_revision=v.base_revision,
        checkpoint_revision=v.revision,
        temperature=v.temperature if temperature is None else temperature,
        max_length=max_length,
        chat_prefix=CHAT_PREFIX,
        chat_suffix=CHAT_SUFFIX,
        head_weight=np.asarray(weight, dtype=np.float32),
        head_bias=bias,
    )


@pytest.fixture(scope="session")
def tokenizer(tmp_path_factory):
    from models.qwen35 import tokenizer_build
    from models.tokenizer import TokenizerHandle

    directory = str(tmp_path_factory.mktemp("open-jev-tokenizer"))
    tokenizer_build.save(directory)
    return TokenizerHandle.load(directory)


@pytest.fixture
def export27():
    return make_export("27b-v1.1")


@pytest.fixture
def export9():
    return make_export("9b")


@pytest.fixture(scope="session")
def package(tmp_path_factory):
    """A tiny random Open-Jev 9B package (base + rank-8 LoRA + scalar head)."""
    pytest.importorskip("peft")
    from models.open_jev import random_checkpoint

    return random_checkpoint.build(str(tmp_path_factory.mktemp("open-jev-random")), "9b", seed=5)


@pytest.fixture(scope="session")
def jev_export(package, tmp_path_factory):
    from models.open_jev import export

    out = str(tmp_path_factory.mktemp("open-jev-export"))
    export.export(package, out, base=os.path.join(os.path.dirname(package), "base"), progress=None)
    return out
