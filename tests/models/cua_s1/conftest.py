"""Cua-S1 fixtures: the locally trained Qwen-style tokenizer (A-Z at 32-57, chat specials) and a
tiny random base with random `text/` and `multimodal/` LoRA adapters."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tok(tmp_path_factory):
    from models.qwen35 import tokenizer_build
    from models.tokenizer import TokenizerHandle

    directory = str(tmp_path_factory.mktemp("cua-tok"))
    tokenizer_build.save(directory)
    return TokenizerHandle.load(directory)


@pytest.fixture(scope="session")
def random_cua(tmp_path_factory):
    pytest.importorskip("peft")
    from models.cua_s1 import random_checkpoint

    return random_checkpoint.build(str(tmp_path_factory.mktemp("cua-random")), seed=3)


@pytest.fixture(scope="session")
def cua_export(random_cua, tmp_path_factory):
    from models.cua_s1 import export

    out = str(tmp_path_factory.mktemp("cua-export"))
    export.export(random_cua.base, out, adapter=random_cua.adapter, progress=None)
    return out
