"""Fixtures: one tiny random Clef-Flash checkpoint (published layout), its tokenizer both ways
(ours and a transformers one for the reference), the reference module and heads, and the
exported standalone head."""

from __future__ import annotations

import json
import os

import pytest


@pytest.fixture(scope="session")
def clef_dir(tmp_path_factory):
    from models.clef_flash import random_checkpoint

    return random_checkpoint.build(str(tmp_path_factory.mktemp("clef") / "ck"), seed=3)


@pytest.fixture(scope="session")
def ref():
    pytest.importorskip("clef_finetune")
    from models.clef_flash.random_checkpoint import reference

    return reference()


@pytest.fixture(scope="session")
def tok(clef_dir):
    from models.tokenizer import TokenizerHandle

    return TokenizerHandle.load(clef_dir)


@pytest.fixture(scope="session")
def hf_tok(clef_dir):
    """What upstream calls: a transformers tokenizer over the same tokenizer.json."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_file=os.path.join(clef_dir, "tokenizer.json"), pad_token="<|endoftext|>", eos_token="<|im_end|>"
    )


@pytest.fixture(scope="session")
def ref_head(clef_dir, ref):
    """The reference JointSchemaHead with the checkpoint's BF16 weights, computing in fp32."""
    import torch
    from safetensors.torch import load_file

    with open(os.path.join(clef_dir, "joint_head_config.json")) as f:
        head = ref.JointSchemaHead(**json.load(f))
    head.load_state_dict(load_file(os.path.join(clef_dir, "joint_head.safetensors")), strict=True)
    return head.to(torch.float32).eval()


@pytest.fixture(scope="session")
def head(clef_dir):
    from models.clef_flash.head_graph import load_head

    return load_head(clef_dir)


@pytest.fixture(scope="session")
def head_onnx(clef_dir, tmp_path_factory):
    """(export info, ORT CPU session) of the standalone head."""
    import onnxruntime as ort

    from models.clef_flash.head_graph import export_head

    info = export_head(clef_dir, str(tmp_path_factory.mktemp("clef-onnx") / "head.onnx"))
    return info, ort.InferenceSession(info["onnx"], providers=["CPUExecutionProvider"])


@pytest.fixture(scope="session")
def clef_export(clef_dir, tmp_path_factory):
    """One record a pass: the published clef-joint-v1 signature (`--records single`)."""
    from models.clef_flash import export

    out = str(tmp_path_factory.mktemp("clef-export"))
    export.export(clef_dir, out, records="single", progress=None)
    return out


@pytest.fixture(scope="session")
def clef_batched(clef_dir, tmp_path_factory):
    """Several records a pass, as rows of one batch: the exporter's default (`--records batched`)."""
    from models.clef_flash import export

    out = str(tmp_path_factory.mktemp("clef-batched"))
    export.export(clef_dir, out, progress=None)
    return out
