"""Full-size random checkpoints written as shards and as a description (drawn as they load) give
the exporters the same tensors, bit for bit; tried at tiny dims, which take the same code path."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from models.qwen35 import export, random_checkpoint, weights  # noqa: E402
from models.qwen35.dims import TextDims  # noqa: E402


@pytest.fixture(params=[True, False], ids=["tied", "untied"])
def both_forms(request, tmp_path):
    text = random_checkpoint.tiny_text_config(vocab_size=320, tied=request.param)
    written, described = str(tmp_path / "written"), str(tmp_path / "described")
    os.makedirs(written)
    random_checkpoint._write_full(written, text, seed=7, device=torch.device("cpu"))
    random_checkpoint.describe(described, text, seed=7, device=torch.device("cpu"))
    return text, written, described


@pytest.mark.parametrize("dtype", [None, torch.float16])
def test_a_described_checkpoint_loads_what_the_written_one_holds(both_forms, dtype):
    text, written, described = both_forms
    assert not [n for n in os.listdir(described) if n.endswith(".safetensors")]
    read, drawn = weights.load_text_state(written, dtype), weights.load_text_state(described, dtype)
    assert sorted(drawn) == sorted(read)
    assert ("lm_head.weight" in drawn) is not text["tie_word_embeddings"]
    for name, tensor in read.items():
        assert drawn[name].dtype == tensor.dtype == (dtype or torch.bfloat16)
        assert torch.equal(drawn[name], tensor), name
    assert TextDims.from_dir(described) == TextDims.from_dir(written)


def test_a_described_checkpoint_hashes_its_description_not_shards(both_forms):
    _, written, described = both_forms
    assert random_checkpoint.DESCRIBED in export.source_files(described)
    assert not [n for n in export.source_files(described) if n.endswith(".safetensors")]
    assert "model-00001.safetensors" in export.source_files(written)
    sources = export.hash_sources(described, export.source_files(described), progress=lambda m: None)
    assert set(sources) == {"config.json", random_checkpoint.DESCRIBED}


def test_another_seed_draws_other_weights(tmp_path):
    text = random_checkpoint.tiny_text_config(vocab_size=320, tied=True)
    for seed in (1, 2):
        random_checkpoint.describe(str(tmp_path / str(seed)), text, seed=seed, device=torch.device("cpu"))
    one, two = (weights.load_text_state(str(tmp_path / s)) for s in ("1", "2"))
    assert not torch.equal(one["embed_tokens.weight"], two["embed_tokens.weight"])


def test_an_unknown_description_is_refused(tmp_path):
    (tmp_path / random_checkpoint.DESCRIBED).write_text('{"format": "other", "seed": 0}')
    with pytest.raises(ValueError, match="unknown format"):
        weights.load_text_state(str(tmp_path))
    (tmp_path / random_checkpoint.DESCRIBED).write_text('{"format": "omni-random-v1", "seed": 0}')
    with pytest.raises(ValueError, match="unknown generator"):
        weights.load_text_state(str(tmp_path))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_description_drawn_on_cuda_is_refused_without_it(tmp_path):
    """CUDA's generator and the CPU's draw different numbers from one seed: drawing a CUDA
    description on the CPU would export other weights under the same source hash."""
    text = random_checkpoint.tiny_text_config(vocab_size=320, tied=True)
    random_checkpoint.describe(str(tmp_path), text, seed=0, device=torch.device("cuda"))
    with pytest.raises(ValueError, match="described on a CUDA machine"):
        weights.load_text_state(str(tmp_path))


def test_only_the_named_tensors_are_kept_and_they_are_the_same(both_forms):
    _, _, described = both_forms
    whole = random_checkpoint.described_state(described)
    name = "model.language_model.layers.2.mlp.down_proj.weight"
    some = random_checkpoint.described_state(described, only={name})
    assert list(some) == [name] and torch.equal(some[name], whole[name])


def test_the_command_describes_full_sizes_only(capsys):
    with pytest.raises(SystemExit):
        random_checkpoint.main(["unused", "--size", "tiny", "--described"])
    assert "full sizes" in capsys.readouterr().err


def test_clef_flash_reads_a_described_checkpoints_lm_head(both_forms):
    """Clef-Flash's head reads the language-model head itself (the embeddings when tied)."""
    from models.clef_flash.head_graph import load_lm_head

    _, written, described = both_forms
    assert torch.equal(load_lm_head(described), load_lm_head(written))
