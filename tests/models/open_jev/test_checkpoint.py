"""Open-Jev checkpoint facts: variants and names, the upstream package layout (a tiny random
one built with peft), head.pt loading, and the merged-export metadata round trip."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from models.open_jev import checkpoint as ck
from models.open_jev.checkpoint import (
    CHAT_PREFIX,
    CHAT_SUFFIX,
    EXPORT_FILE,
    VARIANTS,
    read_export_metadata,
    read_package,
    variant_for,
    write_export_metadata,
)
from models.open_jev.head import export_metadata, load_head
from tests.models.open_jev.conftest import make_export


def test_variants():
    v27, v9 = VARIANTS["27b-v1.1"], VARIANTS["9b"]
    assert v27.base_id == "Qwen/Qwen3.8-27B@1d4bf0f2ff6012fd82039f2fa52739d0dd7c60c0"
    assert v9.base_id == "Qwen/Qwen3.5-9B@c202236235762e1c871ad0ccb60c8ee5ba337b9a"
    assert (v27.alias, v9.alias) == ("open-jev-27b-v1.1", "open-jev-9b")
    assert (v27.temperature, v9.temperature) == (2.5343690298472983, 1.8969118766347646)
    assert (v27.hidden_size, v9.hidden_size) == (5120, 4096)
    assert v27.pack_candidates and not v9.pack_candidates
    assert variant_for("Qwen/Qwen3.5-9B") is v9
    assert variant_for("Qwen/Qwen3.8-27B", "1d4bf0f2ff6012fd82039f2fa52739d0dd7c60c0") is v27
    with pytest.raises(ValueError, match="pinned"):
        variant_for("Qwen/Qwen3.8-27B", "0" * 40)
    with pytest.raises(ValueError):
        variant_for("Qwen/Qwen3.5-4B")


def test_names():
    v9 = VARIANTS["9b"]
    for name in (None, "open-jev", "jev-latest", "open-jev-9b", "Qwen/Qwen3.5-9B", v9.base_id, "Open-Jev-9B"):
        assert v9.serves(name)
    for name in ("open-jev-27b-v1.1", "Qwen/Qwen3.8-27B", "open-jev-9", "", 9, True):
        assert not v9.serves(name)


# --- merged-export metadata -----------------------------------------------------------------


def test_export_metadata_round_trip(tmp_path):
    meta = make_export("9b", weight=[0.1, -2.5e-7, 3.0e5], bias=float(np.float32(-0.7)))
    path = write_export_metadata(str(tmp_path), meta)
    assert os.path.basename(path) == EXPORT_FILE
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    assert list(data) == [
        "format",
        "model_id",
        "base_revision",
        "checkpoint_revision",
        "temperature",
        "max_length",
        "chat_prefix",
        "chat_suffix",
        "head_weight",
        "head_bias",
    ]
    assert data["format"] == "open-jev-text-merged/1" and data["model_id"] == "Qwen/Qwen3.5-9B"
    assert data["chat_prefix"] == CHAT_PREFIX and data["chat_suffix"] == CHAT_SUFFIX
    assert data["max_length"] == 4096 and data["temperature"] == 1.8969118766347646
    back = read_export_metadata(str(tmp_path))
    assert back.head_weight.dtype == np.float32 and np.array_equal(back.head_weight, meta.head_weight)
    assert back.head_bias == meta.head_bias
    assert (
        back.model_id,
        back.base_revision,
        back.checkpoint_revision,
        back.temperature,
        back.max_length,
        back.chat_prefix,
        back.chat_suffix,
    ) == (
        meta.model_id,
        meta.base_revision,
        meta.checkpoint_revision,
        meta.temperature,
        meta.max_length,
        meta.chat_prefix,
        meta.chat_suffix,
    )
    assert back.variant is VARIANTS["9b"]


def _rewrite(tmp_path, **changes):
    write_export_metadata(str(tmp_path), make_export("27b-v1.1"))
    path = tmp_path / EXPORT_FILE
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is ...:
            del data[key]
        else:
            data[key] = value
    path.write_text(json.dumps(data))
    return str(tmp_path)


@pytest.mark.parametrize(
    "changes",
    [
        {"format": "open-jev-text-merged/2"},
        {"model_id": "Qwen/Qwen3.5-4B"},
        {"base_revision": "0" * 40},
        {"max_length": 0},
        {"max_length": 16385},
        {"max_length": 4096.0},
        {"max_length": True},
        {"temperature": 0},
        {"temperature": -1.0},
        {"temperature": "2.5"},
        {"temperature": ...},
        {"chat_prefix": None},
        {"chat_suffix": ...},
        {"head_weight": []},
        {"head_weight": [1.0, None]},
        {"head_weight": [1e39]},
        {"head_bias": None},
        {"head_bias": True},
        {"head_bias": 1e39},
    ],
)
def test_read_export_metadata_refuses(tmp_path, changes):
    with pytest.raises(ValueError):
        read_export_metadata(_rewrite(tmp_path, **changes))


def test_read_export_metadata_limits_and_defaults(tmp_path):
    for max_length in (1, 16384):
        assert read_export_metadata(_rewrite(tmp_path, max_length=max_length)).max_length == max_length
    assert read_export_metadata(_rewrite(tmp_path, max_length=...)).max_length == 4096
    with pytest.raises(FileNotFoundError):
        read_export_metadata(str(tmp_path / "missing"))


# --- the upstream package -------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_package(tmp_path_factory):
    from models.open_jev import random_checkpoint

    root = tmp_path_factory.mktemp("open-jev-package")
    return str(root), random_checkpoint.build(str(root), "9b", seed=3)


def test_package_layout(tiny_package):
    root, package = tiny_package
    assert package == os.path.join(root, "checkpoint")
    for name in (
        "model.json",
        "temperature.json",
        "head.pt",
        "adapter/adapter_config.json",
        "adapter/adapter_model.safetensors",
    ):
        assert os.path.exists(os.path.join(package, name)), name
    with open(os.path.join(package, "adapter", "adapter_config.json")) as f:
        adapter = json.load(f)
    assert adapter["peft_type"] == "LORA" and adapter["r"] == 8
    assert adapter["base_model_name_or_path"] == "Qwen/Qwen3.5-9B"
    assert set(adapter["target_modules"]) == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    }
    pkg = read_package(package)
    assert (pkg.model_id, pkg.base_revision) == ("Qwen/Qwen3.5-9B", VARIANTS["9b"].base_revision)
    assert pkg.temperature == 1.8969118766347646 and pkg.variant is VARIANTS["9b"]


def test_head_loading(tiny_package):
    import torch

    _, package = tiny_package
    pkg = read_package(package)
    raw = torch.load(pkg.head_path, weights_only=True)
    assert tuple(raw["weight"].shape) == (1, 64) and tuple(raw["bias"].shape) == (1,)
    weight, bias = load_head(pkg, hidden_size=64)
    assert weight.dtype == np.float32 and weight.shape == (64,)
    assert np.array_equal(weight, raw["weight"].reshape(-1).numpy()) and bias == raw["bias"].item()
    with pytest.raises(ValueError, match=r"\(1, 4096\)"):
        load_head(pkg)  # the 9B's real width: the tiny head does not fit


def test_export_metadata_from_the_package(tiny_package, tmp_path):
    _, package = tiny_package
    pkg = read_package(package)
    meta = export_metadata(pkg, max_length=2048, hidden_size=64)
    assert meta.checkpoint_revision == VARIANTS["9b"].revision and meta.max_length == 2048
    write_export_metadata(str(tmp_path), meta)
    back = read_export_metadata(str(tmp_path))
    weight, bias = load_head(pkg, hidden_size=64)
    assert np.array_equal(back.head_weight, weight) and back.head_bias == bias
    assert back.temperature == pkg.temperature and back.max_length == 2048
    with pytest.raises(ValueError):
        export_metadata(pkg, max_length=16385, hidden_size=64)


def test_read_package_refuses(tiny_package, tmp_path):
    _, package = tiny_package
    broken = str(tmp_path / "checkpoint")
    shutil.copytree(package, broken)
    os.remove(os.path.join(broken, "head.pt"))
    with pytest.raises(FileNotFoundError, match="head.pt"):
        read_package(broken)
    shutil.copy(os.path.join(package, "head.pt"), broken)
    with open(os.path.join(broken, "temperature.json"), "w") as f:
        f.write('{"temperature": NaN}')
    with pytest.raises(ValueError, match="temperature"):
        read_package(broken)
    with open(os.path.join(broken, "temperature.json"), "w") as f:
        json.dump({"temperature": 1.5}, f)
    with open(os.path.join(broken, "model.json"), "w") as f:
        json.dump({"model_id": "Qwen/Qwen3.5-9B"}, f)
    with pytest.raises(ValueError, match="model.json"):
        read_package(broken)


def test_the_adapter_merges_into_the_language_model(tiny_package):
    """Upstream's export: PEFT on `.model.language_model`, merge_and_unload(safe_merge=True).
    The random B is nonzero, so every targeted projection changes and nothing else does."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForImageTextToText

    root, package = tiny_package
    full = AutoModelForImageTextToText.from_pretrained(os.path.join(root, "base"), dtype=torch.bfloat16)
    language_model = full.model.language_model
    before = {k: v.clone() for k, v in language_model.state_dict().items()}
    adapter = read_package(package).adapter_path
    merged = PeftModel.from_pretrained(language_model, adapter).merge_and_unload(safe_merge=True)
    after = merged.state_dict()
    assert set(after) == set(before)
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    targets = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    assert changed == {k for k in before if k.endswith(tuple(t + ".weight" for t in targets))}
    assert len(changed) == 4 * 3 + 4  # 4 MLPs; q/k/v/o of the one full-attention layer


def test_chat_parts_from_a_template():
    class Template:
        def apply_chat_template(self, messages, tokenize, add_generation_prompt, enable_thinking):
            assert not tokenize and add_generation_prompt and enable_thinking is False
            return CHAT_PREFIX + messages[0]["content"] + CHAT_SUFFIX

    assert ck.chat_parts(Template()) == (CHAT_PREFIX, CHAT_SUFFIX)

    class Twice(Template):
        def apply_chat_template(self, messages, **kw):
            return messages[0]["content"] * 2

    with pytest.raises(ValueError, match="single-user"):
        ck.chat_parts(Twice())
