"""The Qwen3.5 backbone against transformers on CPU fp32: our torch graph, then the ONNX export
run by ONNX Runtime's LinearAttention kernel; padding invariance; sequences over one GDN chunk."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.qwen35 import export, weights
from models.qwen35.dims import TextDims
from tests.models.qwen35.conftest import reference

LENGTHS = [150, 97, 64, 5]  # > 2 GDN chunks, a ragged one, exactly one chunk, short


def _batch(vocab: int, lengths, pad_id: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.full((len(lengths), max(lengths)), pad_id, dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, :n] = torch.randint(0, vocab - 8, (n,), generator=g)
    return ids, torch.tensor([n - 1 for n in lengths])


def _reference_last(model, ids, lengths):
    """transformers, one unpadded row at a time: hidden at the last token and the full logits."""
    text = model.model.language_model if hasattr(model.model, "language_model") else model.model
    hidden, logits = [], []
    with torch.no_grad():
        for i, n in enumerate(lengths):
            h = text(input_ids=ids[i : i + 1, :n]).last_hidden_state[0, -1]
            hidden.append(h)
            logits.append(model.lm_head(h))
    return torch.stack(hidden), torch.stack(logits)


def _rel(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("which", ["qwen_tied", "qwen_untied"])
def test_torch_graph_matches_transformers(which, request):
    directory = request.getfixturevalue(which)
    dims = TextDims.from_dir(directory)
    module = export.build_module(dims, weights.load_text_state(directory, torch.float32), "last")
    ref = reference(directory)
    ids, positions = _batch(dims.vocab_size, LENGTHS, pad_id=0)
    want, _ = _reference_last(ref, ids, LENGTHS)
    with torch.no_grad():
        got = module(ids, positions)
    assert _rel(got, want) <= 1e-4


def test_onnx_matches_transformers_hidden_and_letter_probabilities(qwen_tied, tied_letters_export):
    import onnxruntime as ort

    _, path = tied_letters_export
    dims = TextDims.from_dir(qwen_tied)
    ref = reference(qwen_tied)
    ids, positions = _batch(dims.vocab_size, LENGTHS, pad_id=dims.vocab_size - 5)
    want_h, want_logits = _reference_last(ref, ids, LENGTHS)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    hidden, letters = session.run(None, {"input_ids": ids.numpy(), "positions": positions.numpy()})
    assert _rel(hidden, want_h) <= 1e-4
    # Tied embeddings: the letter logits are the lm_head rows 32..57 (A-Z).
    want_letters = want_logits[:, 32:58]
    assert _rel(letters, want_letters) <= 1e-4
    p = torch.softmax(torch.from_numpy(letters).double(), -1)
    q = torch.softmax(want_letters.double(), -1)
    assert float((p - q).abs().max()) <= 1e-4


def test_padding_and_batch_mates_do_not_change_a_row(tied_letters_export, qwen_tied):
    import onnxruntime as ort

    _, path = tied_letters_export
    dims = TextDims.from_dir(qwen_tied)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ids, positions = _batch(dims.vocab_size, LENGTHS, pad_id=3)
    together = session.run(None, {"input_ids": ids.numpy(), "positions": positions.numpy()})
    for i, n in enumerate(LENGTHS):
        alone = session.run(None, {"input_ids": ids[i : i + 1, :n].numpy(), "positions": np.array([n - 1])})
        for a, b in zip(alone, together):
            assert np.abs(a[0] - b[i]).max() <= 1e-5 * max(1.0, float(np.abs(a).max()))


def test_export_check_on_untraced_shapes(tied_letters_export):
    module, path = tied_letters_export
    assert export.check_graph(module, path) < 1e-3


def test_weights_read_both_layouts_and_tying(qwen_tied, qwen_untied):
    tied = weights.load_text_state(qwen_tied)
    untied = weights.load_text_state(qwen_untied)
    assert "lm_head.weight" not in tied and "lm_head.weight" in untied
    assert not any(k.startswith(("model.", "visual")) for k in tied)
    assert TextDims.from_dir(qwen_tied).tie_word_embeddings
    assert TextDims.from_dir(qwen_untied).layer_types.count("full_attention") == 2


def test_weights_refuse_a_folder_without_weights(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError):
        weights.load_text_state(str(tmp_path))


def test_full_size_key_list_matches_transformers(qwen_tied):
    """The full-size random writer names tensors exactly as transformers saves them."""
    import json

    from safetensors import safe_open

    from models.qwen35.random_checkpoint import text_keys

    with open(qwen_tied + "/config.json") as f:
        text = json.load(f)["text_config"]
    with safe_open(qwen_tied + "/model.safetensors", "pt") as f:
        saved = {
            k: tuple(f.get_slice(k).get_shape())
            for k in f.keys()  # noqa: SIM118 - safe_open
            if k.startswith("model.language_model.")
        }
    assert dict(text_keys(text, "model.language_model.")) == saved


@pytest.mark.parametrize("dtype", ["float16", "float32", "bfloat16"])
def test_consuming_load_builds_the_same_weights_and_empties_the_state(qwen_untied, dtype):
    """build_module(consume=True), the exporters' load, gives every weight bit for bit what
    converting the whole checkpoint first and loading that gives (the load before it), and hands
    the checkpoint's tensors back as it goes: only the untied lm_head, which the backbone does not
    hold, is left."""
    from models.qwen35.graph import Backbone

    dims = TextDims.from_dir(qwen_untied)
    state = weights.load_text_state(qwen_untied)  # as stored: bf16
    target = getattr(torch, dtype)
    with torch.device("meta"):
        ref = Backbone(dims, "last")
    ref = ref.to_empty(device="cpu").to(target)
    ref.load_state_dict({k: v.to(target) for k, v in state.items() if k != "lm_head.weight"})
    for layer in ref.layers:
        for module in (layer.mlp, layer.linear_attn if layer.kind == "linear_attention" else layer.self_attn):
            module.merge_projections()
    module = export.build_module(dims, state, "last", dtype, attention="sdpa", consume=True)
    assert list(state) == ["lm_head.weight"]
    got, want = module.state_dict(), ref.state_dict()
    assert set(got) == set(want) and len(got) > 50
    for k in want:
        assert got[k].dtype == want[k].dtype and torch.equal(got[k], want[k]), k


def test_a_checkpoint_of_another_shape_is_refused(qwen_untied):
    dims = TextDims.from_dir(qwen_untied)
    state = weights.load_text_state(qwen_untied)
    key = next(k for k in state if k.endswith("mlp.down_proj.weight"))
    state[key] = state[key][:, :-1]
    keys = set(state)
    with pytest.raises(ValueError, match="does not match the Qwen3.5 text stack: .*down_proj"):
        export.build_module(dims, state, "last", "float32", consume=True)
    assert set(state) == keys  # refused before anything was consumed


@pytest.mark.slow
def test_the_export_folds_as_it_writes_into_the_file_folds_graph(qwen_untied, tmp_path, monkeypatch):
    """A Qwen3.5 export's weight transforms (transposes, row slices) are folded before the save
    (models.fold.fold_lazily): the same graph and weights, byte for byte, as saving unfolded and
    folding the file, and nothing left for the file fold."""
    from models import fold
    from tests.models.test_fold import same_graph

    dims = TextDims.from_dir(qwen_untied)
    module = export.build_module(dims, weights.load_text_state(qwen_untied), "last", "float16")
    lines = []
    (tmp_path / "lazy").mkdir()
    (tmp_path / "file").mkdir()
    lazy = export.export_graph(module, str(tmp_path / "lazy"), "gated_delta_net_fused", progress=lines.append)
    assert any("weight transforms folded as they are written" in line and "(0 " not in line for line in lines)
    assert not any(line.startswith("folded ") for line in lines)  # the file fold found nothing
    assert fold.fold_weights(lazy) == 0
    monkeypatch.setattr(fold, "fold_lazily", lambda model: 0)
    lines.clear()
    plain = export.export_graph(module, str(tmp_path / "file"), "gated_delta_net_fused", progress=lines.append)
    assert any(line.startswith("folded ") for line in lines)
    assert same_graph(lazy, plain) > 20
