"""The HF transformers baseline's model (benchmarks.gpu.qwen_bench.hf_model) holds the checkpoint's
weights, written or described, in the dtype asked for, as from_pretrained would build it; on the
CPU at tiny dims (the GPU machine runs it on CUDA)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from safetensors.torch import save_file  # noqa: E402

from benchmarks.gpu.qwen_bench import hf_model  # noqa: E402
from models.qwen35 import random_checkpoint, weights  # noqa: E402


@pytest.fixture(scope="module")
def both_forms(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen_bench")
    text = random_checkpoint.tiny_text_config(vocab_size=320, tied=False)
    written, described = str(root / "written"), str(root / "described")
    random_checkpoint.describe(described, text, seed=3, device=torch.device("cpu"))
    # The written twin: the same tensors in one shard, as the full-size builder writes them.
    os.makedirs(written)
    shutil.copy(os.path.join(described, "config.json"), written)
    state = random_checkpoint.described_state(described)
    save_file(state, os.path.join(written, "model-00001.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(written, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": dict.fromkeys(state, "model-00001.safetensors")}, f)
    return written, described


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_the_baseline_holds_the_checkpoints_weights_in_the_asked_dtype(both_forms, dtype):
    written, _ = both_forms
    model = hf_model(written, dtype, device="cpu")
    state = weights.load_text_state(written, dtype)
    params = dict(model.model.named_parameters())
    assert set(state) - {"lm_head.weight"} == set(params)
    for name, tensor in params.items():
        assert tensor.dtype == dtype, name
        assert torch.equal(tensor, state[name]), name
    assert torch.equal(model.lm_head.weight, state["lm_head.weight"])
    # Built in dtype, not cast after: the rotary frequencies stay float32, as from_pretrained keeps them.
    assert model.model.rotary_emb.inv_freq.dtype == torch.float32
    assert torch.get_default_dtype() == torch.float32


def test_a_described_checkpoint_gives_the_same_baseline_as_the_written_one(both_forms):
    written, described = both_forms
    ids = torch.randint(0, 320, (1, 37), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        a, b = (hf_model(d, torch.bfloat16, device="cpu")(input_ids=ids).logits for d in (written, described))
    assert torch.isfinite(a).all()
    assert torch.equal(a, b)


def test_timed_reports_a_variant_that_cannot_run_and_times_the_rest():
    """benchmarks.gpu.qwen_bench._timed: every call runs warm-up plus timed rounds, interleaved;
    the first call's time is recorded per shape; one that raises is named, not fatal."""
    from benchmarks.gpu.qwen_bench import _timed

    ran = []

    def broken():
        raise RuntimeError("no kernel for this shape")

    calls = {"a": lambda: ran.append("a"), "b": lambda: ran.append("b"), "broken": broken}
    results: dict = {}
    stats = _timed(calls, "218", "1x218", warmup=2, iters=3, results=results)
    assert set(stats) == {"a", "b"} and "broken" not in calls
    assert ran == ["a", "b"] + ["a", "b"] * 5  # first calls, then 2 + 3 rounds
    assert set(results["first_call_ms"]["218"]) == {"a", "b"}
    assert "no kernel" in results["errors"]["broken@1x218"]
