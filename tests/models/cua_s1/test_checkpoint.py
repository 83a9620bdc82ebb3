"""Cua-S1 checkpoint facts: identity, letter ids, resolving the `text/` adapter (and refusing the
multimodal one or unexpected targets) on a tiny random adapter saved by peft, and the marker."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from models.cua_s1 import checkpoint as ck


def test_identity():
    assert ck.IDENTITY == "cua-ai/cua-s1-4b-0.2@16818868b0cc7813808aae4e87b417657046ab79:text"
    assert ck.BASE == "Qwen/Qwen3.5-4B@851bf6e806efd8d0a36b00ddf55e13ccb7b8cd0a"
    assert ck.MODEL_NAME == "cua-s1-4b-0.2"


def test_letters_are_single_tokens_32_to_57(tok):
    assert ck.letter_token_ids(tok.tokenizer) == list(ck.LETTER_IDS) == list(range(32, 58))
    assert [tok.encode(c) for c in ck.LETTERS] == [[i] for i in range(32, 58)]


def test_text_adapter_is_accepted(random_cua):
    from models.qwen35.dims import TextDims

    for path in (random_cua.adapter, random_cua.text):  # the repo folder or text/ itself
        a = ck.resolve_adapter(path)
        assert a.directory == random_cua.text
        assert os.path.basename(a.weights) == "adapter_model.safetensors"
        assert (a.r, a.alpha, a.scale) == (16, 32.0, 2.0)
        assert set(a.targets) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
        assert (a.layers, a.attention_layers) == (4, (3,))
    types = TextDims.from_dir(random_cua.base).layer_types
    assert ck.resolve_adapter(random_cua.text, types).attention_layers == (3,)
    # The base's layer types decide: a base with full attention elsewhere does not fit.
    with pytest.raises(ck.AdapterError, match="full-attention layers"):
        ck.resolve_adapter(random_cua.text, ["full_attention"] + ["linear_attention"] * 3)


def test_multimodal_adapter_is_refused(random_cua):
    with pytest.raises(ck.AdapterError, match="multimodal"):
        ck.resolve_adapter(random_cua.multimodal)


def _copy(src: str, dst) -> str:
    out = str(dst / "text")
    shutil.copytree(src, out)
    return out


def _edit_config(directory: str, **changes) -> None:
    path = os.path.join(directory, "adapter_config.json")
    with open(path) as f:
        config = json.load(f)
    config.update(changes)
    with open(path, "w") as f:
        json.dump(config, f)


def _edit_weights(directory: str, edit) -> None:
    from safetensors.numpy import load_file, save_file

    path = os.path.join(directory, "adapter_model.safetensors")
    tensors = load_file(path)
    edit(tensors)
    save_file(tensors, path)


@pytest.mark.parametrize(
    "targets",
    [
        ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "in_proj_qkv"],
        ["q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "down_proj"],
        ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "linear_fc1"],
        "all-linear",
    ],
)
def test_unexpected_targets_in_the_config_are_refused(random_cua, tmp_path, targets):
    directory = _copy(random_cua.text, tmp_path)
    _edit_config(directory, target_modules=targets)
    with pytest.raises(ck.AdapterError):
        ck.resolve_adapter(directory)


def test_a_regex_selecting_exactly_the_targets_is_accepted(random_cua, tmp_path):
    directory = _copy(random_cua.text, tmp_path)
    _edit_config(directory, target_modules=r".*\.(self_attn\.[qkvo]_proj|mlp\.(gate|up|down)_proj)")
    assert ck.resolve_adapter(directory).targets == (r".*\.(self_attn\.[qkvo]_proj|mlp\.(gate|up|down)_proj)",)


def test_unexpected_tensors_are_refused(random_cua, tmp_path):
    gdn = tmp_path / "gdn"
    gdn.mkdir()
    directory = _copy(random_cua.text, gdn)
    key = "base_model.model.model.layers.0.linear_attn.in_proj_qkv.lora_A.weight"
    _edit_weights(directory, lambda t: t.__setitem__(key, np.zeros((16, 64), np.float32)))
    with pytest.raises(ck.AdapterError, match="leaves alone|unexpected tensor"):
        ck.resolve_adapter(directory)

    missing = tmp_path / "missing"
    missing.mkdir()
    directory = _copy(random_cua.text, missing)
    drop = [
        k
        for k in (
            "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight",
            "base_model.model.model.layers.3.self_attn.q_proj.lora_B.weight",
        )
    ]
    _edit_weights(directory, lambda t: [t.pop(k) for k in drop])
    with pytest.raises(ck.AdapterError, match="missing"):
        ck.resolve_adapter(directory)

    rank = tmp_path / "rank"
    rank.mkdir()
    directory = _copy(random_cua.text, rank)
    _edit_config(directory, r=8)
    with pytest.raises(ck.AdapterError, match="rank 8"):
        ck.resolve_adapter(directory)


def test_merge_changing_options_are_refused(random_cua, tmp_path):
    for i, change in enumerate(
        [{"use_dora": True}, {"rank_pattern": {"q_proj": 8}}, {"modules_to_save": ["lm_head"]}, {"peft_type": "IA3"}]
    ):
        (tmp_path / str(i)).mkdir()
        directory = _copy(random_cua.text, tmp_path / str(i))
        _edit_config(directory, **change)
        with pytest.raises(ck.AdapterError):
            ck.resolve_adapter(directory)


def test_weights_file_name_does_not_matter(random_cua, tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file

    renamed = tmp_path / "renamed"
    renamed.mkdir()
    directory = _copy(random_cua.text, renamed)
    os.rename(os.path.join(directory, "adapter_model.safetensors"), os.path.join(directory, "weights.safetensors"))
    assert os.path.basename(ck.resolve_adapter(directory).weights) == "weights.safetensors"

    pickled = tmp_path / "bin"
    pickled.mkdir()
    directory = _copy(random_cua.text, pickled)
    path = os.path.join(directory, "adapter_model.safetensors")
    torch.save(load_file(path), os.path.join(directory, "adapter_model.bin"))
    os.remove(path)
    a = ck.resolve_adapter(directory)
    assert os.path.basename(a.weights) == "adapter_model.bin" and a.r == 16

    empty = tmp_path / "empty"
    empty.mkdir()
    shutil.copy(os.path.join(random_cua.text, "adapter_config.json"), empty)
    with pytest.raises(ck.AdapterError, match="no weights"):
        ck.resolve_adapter(str(empty))
    with pytest.raises(ck.AdapterError, match="not a PEFT adapter"):
        ck.resolve_adapter(str(tmp_path))


def test_random_adapter_changes_the_merged_weights(random_cua):
    """B is random, so merging matters: W' = W + 2·B·A differs from the base."""
    torch = pytest.importorskip("torch")
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(random_cua.base, dtype=torch.float32)
    w = base.model.layers[3].self_attn.q_proj.weight.detach().clone()
    merged = PeftModel.from_pretrained(base, random_cua.text).merge_and_unload()
    w2 = merged.model.layers[3].self_attn.q_proj.weight.detach()
    lora = load_file(os.path.join(random_cua.text, "adapter_model.safetensors"))
    prefix = "base_model.model.model.layers.3.self_attn.q_proj."
    delta = 2.0 * lora[prefix + "lora_B.weight"] @ lora[prefix + "lora_A.weight"]
    assert float((w2 - w).abs().max()) > 1e-3
    torch.testing.assert_close(w2, w + delta)


def test_export_marker_round_trip(random_cua, tmp_path):
    adapter = ck.resolve_adapter(random_cua.text)
    written = ck.write_export_marker(str(tmp_path), adapter, merged_dtype="bfloat16")
    with open(tmp_path / "cua_s1_export.json") as f:
        on_disk = json.load(f)
    assert on_disk == written == ck.read_export_marker(str(tmp_path))
    assert on_disk["format"] == "cua-s1-text-merged/1"
    assert on_disk["identity"] == ck.IDENTITY and on_disk["base"] == ck.BASE
    assert on_disk["lora"] == {
        "r": 16,
        "alpha": 32.0,
        "scale": 2.0,
        "targets": list(adapter.targets),
        "weights": "adapter_model.safetensors",
    }
    assert on_disk["merged_dtype"] == "bfloat16" and on_disk["letter_token_ids"] == list(range(32, 58))
    assert not os.path.exists(tmp_path / "cua_s1_export.json.tmp")


def test_export_marker_is_required_and_checked(tmp_path):
    with pytest.raises(ValueError, match="no cua_s1_export.json"):
        ck.read_export_marker(str(tmp_path))
    (tmp_path / "cua_s1_export.json").write_text(json.dumps({"format": "open-jev-text-merged/1"}))
    with pytest.raises(ValueError, match="format"):
        ck.read_export_marker(str(tmp_path))
    (tmp_path / "cua_s1_export.json").write_text(json.dumps({"format": "cua-s1-text-merged/1"}))
    assert ck.read_export_marker(str(tmp_path)) == {"format": "cua-s1-text-merged/1"}


def test_merging_keeps_float32_weights_and_rounds_half_precision_once(random_cua):
    """A float32 export merges into float32 weights, equal to PEFT's float32 merge; a
    half-precision export reads the weights as stored and rounds the float32 sum once."""
    torch = pytest.importorskip("torch")
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from models.qwen35 import weights
    from models.qwen35.export import load_dtype

    fp32, stored = (
        weights.load_text_state(random_cua.base, load_dtype("float32")),
        weights.load_text_state(random_cua.base, load_dtype("float16")),
    )
    name = "layers.3.self_attn.q_proj.weight"
    unmerged = fp32[name].clone()
    merged = weights.merge_lora(fp32, random_cua.text)
    weights.merge_lora(stored, random_cua.text)
    assert name in merged and fp32[name].dtype == torch.float32
    base = AutoModelForCausalLM.from_pretrained(random_cua.base, dtype=torch.float32)
    peft = PeftModel.from_pretrained(base, random_cua.text).merge_and_unload()
    torch.testing.assert_close(fp32[name], peft.model.layers[3].self_attn.q_proj.weight.detach(), rtol=0, atol=1e-6)
    assert float((fp32[name] - unmerged).abs().max()) > 1e-3
    if stored[name].dtype != torch.float32:
        assert torch.equal(stored[name], fp32[name].to(stored[name].dtype))
