"""The 27B HF baseline with the module cast after it is built (hf_model before 99d7872) against
built in its dtype (as now), one after the other: `python3 hf_ab.py old|new ARGS` (hf_baseline's)."""
import json
import sys

import torch

from benchmarks.gpu import hf_baseline, qwen_bench


def cast_after(checkpoint, dtype, adapter=None):
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    from models.qwen35 import weights

    with open(checkpoint + "/config.json") as f:
        cfg = json.load(f)
    text = dict(cfg.get("text_config", cfg))
    text.pop("model_type", None)
    config = Qwen3_5TextConfig(**text)
    config._attn_implementation = "eager"
    with torch.device("cuda"):
        model = Qwen3_5ForCausalLM(config).to(dtype)
    state = weights.load_text_state(checkpoint, dtype)
    lm_head = state.pop("lm_head.weight", None)
    model.model.load_state_dict(state, strict=True)
    if lm_head is not None:
        model.lm_head.weight.data.copy_(lm_head)
    else:
        model.lm_head.weight = model.model.embed_tokens.weight
    return model.eval()


if sys.argv[1] == "old":
    qwen_bench.hf_model = cast_after
hf_baseline.main(sys.argv[2:])
