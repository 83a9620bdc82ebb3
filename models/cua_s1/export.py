"""Cua-S1 export: Qwen3.5-4B base + the `text/` LoRA adapter → merged backbone ONNX + manifest.

    python -m models.export cua-s1 --checkpoint Qwen/Qwen3.5-4B --adapter cua-ai/cua-s1-4b-0.2/text \
        --out exports/cua-s1 [--dtype float16] [--gdn-kernel gated_delta_net_fused]

The adapter is merged into the text stack (W + (alpha/r)·B·A, rounded once to the weight dtype)
before export; the graph reads the final-norm hidden state at each row's last real token, and
the 26 letter rows of the tied embedding (ids 32-57) are saved next to it so finishing computes
the letter logits on the host in float64, as the native worker does (finish.finish_hidden).

The system turn every prompt starts with is computed once here, in float32, and baked into the
graph (models/qwen35/prefix.py), so a row holds only the tokens after it; the manifest records
the head's token ids.
"""

from __future__ import annotations

import functools
import os
import time

from models import gdn_plan as engines
from models import export_dir, hub, manifest as manifests
from models.cua_s1 import checkpoint as ck
from models.cua_s1.prepare import head_ids
from models.cua_s1.served import LETTER_ROWS
from models.qwen35 import export as qexport
from models.qwen35 import gate as qgate
from models.qwen35 import bake as qbake
from models.qwen35 import weights
from models.qwen35.dims import TextDims
from models.qwen35.export import load_dtype as _load_dtype


def export(
    checkpoint: str,
    out: str,
    *,
    adapter: str | None = None,
    revision: str | None = None,
    subfolder: str | None = None,
    name: str | None = None,
    force: bool = False,
    dtype: str = "float32",
    gdn_kernel: str = "linear_attention",
    parity_gate: str = "enforce",
    gdn_plan: str = engines.DEFAULT,
    progress=print,
) -> dict:
    import numpy as np

    progress = progress or (lambda m: None)
    qgate.check_options(dtype, gdn_kernel, parity_gate)
    t0 = time.perf_counter()
    progress("[1/5] resolving base %s%s" % (checkpoint, " and adapter %s" % adapter if adapter else ""))
    base = hub.resolve(checkpoint, qexport.BASE_FILES, revision=revision, subfolder=subfolder)
    lora = None
    if adapter:
        # The published adapter repo is pinned to the revision the identity names.
        published = adapter == ck.ADAPTER_REPO or adapter.startswith(ck.ADAPTER_REPO + "/")
        pinned = ck.ADAPTER_REVISION if published else None
        ad = hub.resolve(
            adapter,
            ["adapter_config.json", "adapter_model.safetensors", "adapter_model.bin", "text/*"],
            revision=pinned,
        )
        dims = TextDims.from_dir(base.path)
        lora = ck.resolve_adapter(ad.path, dims.layer_types)
    served_name = name or ck.MODEL_NAME
    options = qexport.export_options({"name": served_name, "prompt_head": "baked"}, dtype, gdn_kernel)
    progress("[2/5] hashing sources")
    sources = qexport.hash_sources(base.path, qexport.source_files(base.path), progress)
    if lora is not None:
        sources.update(
            {
                "adapter/" + k: v
                for k, v in manifests.hash_files(
                    lora.directory, ["adapter_config.json", os.path.basename(lora.weights)]
                ).items()
            }
        )
    if not force and export_dir.up_to_date(out, ck.FAMILY, sources, options, parity_gate):
        return export_dir.reuse(out, progress)

    dims = TextDims.from_dir(base.path)
    if not dims.tie_word_embeddings:
        progress("note: untied embeddings; the letter rows come from lm_head")
    progress(
        "[3/5] loading the text stack (%d layers, hidden %d) and merging the adapter"
        % (len(dims.layer_types), dims.hidden_size)
    )
    state = weights.load_text_state(base.path, _load_dtype(dtype))
    merged = (
        weights.merge_lora(
            state,
            lora.directory,
            allowed=["self_attn." + t for t in ck.ATTENTION_TARGETS] + ["mlp." + t for t in ck.MLP_TARGETS],
        )
        if lora
        else []
    )
    rows_from = state["embed_tokens.weight"] if dims.tie_word_embeddings else state["lm_head.weight"]
    letter_rows = rows_from[list(ck.LETTER_IDS)].float().numpy()
    # The checkpoint's tensors map its files: one left referenced keeps its shard's pages resident.
    del rows_from
    model = qexport.build_module(dims, state, "last", dtype, consume=True)
    del state
    baked = qbake.bake_for_export(model, base.path, head_ids, qgate.reference_device(), progress)
    progress("[4/5] exporting (%s, GDN kernel %s)" % (dtype, gdn_kernel))
    gate = functools.partial(
        qgate.run,
        distributions=qgate.letter_distributions(letter_rows),
        kernel=gdn_kernel,
        mode=parity_gate,
        progress=progress,
        spend=True,
        gdn_plan=gdn_plan,
    )
    graph, check = qexport.write_export(out, model, gdn_kernel, progress, base.path, check=True, gate=gate)
    np.save(os.path.join(out, LETTER_ROWS), letter_rows)
    progress("[5/5] writing the manifest")
    random = export_dir.flagged_random(os.path.join(base.path, "config.json"))
    meta = {
        "family": ck.FAMILY,
        "name": served_name,
        "aliases": [],
        "identity": ck.IDENTITY,
        "description": "Cua-S1 4B 0.2 (text adapter): one-pass computer-use decisions over a closed "
        "list of lettered options",
        "random_weights": random,
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "onnx": qexport.ONNX_NAME,
        "source": {"checkpoint": base.name, "revision": base.revision, "adapter": adapter, "sha256": sources},
        "dims": dims.as_dict(),
        "weights_dtype": dtype,
        "graph": graph,
        "check": check,
        "lora": lora.summary() if lora else None,
        "merged_modules": len(merged),
        "inputs": ["input_ids", "positions"],
        "outputs": ["hidden"],
        "prefix": baked,
        "export_options": options,
        "exporter": export_dir.exporter_info(qexport.OPSET),
    }
    ck.write_export_marker(out, lora)
    export_dir.finalize(out, meta, hash_data=False)
    progress("exported %s to %s in %.1f s" % (served_name, out, time.perf_counter() - t0))
    return meta
