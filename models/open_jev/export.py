"""Open-Jev export: upstream package (PEFT adapter + scalar head) on its Qwen3.5 base → merged
backbone ONNX, `open_jev_export.json` and a manifest.

    python -m models.export open-jev --checkpoint ZefanCai/Open-Jev-9B/package/checkpoint \
        --out exports/open-jev-9b [--base ./Qwen3.5-9B] [--dtype float16] [--max-length 4096]

The package's `model.json` names the base (model id and revision), downloaded with
huggingface_hub unless `--base` points at a local copy. The adapter is merged into the text
stack (models/qwen35/weights.merge_lora); the graph returns the final-norm hidden state at each
candidate's last token and the head runs on the host in float64 (finish.head_scores), which is
the native worker's arithmetic exactly (models.md §4.3).
"""

from __future__ import annotations

import functools
import os
import time

from models import gdn_plan as engines
from models import export_dir, hub, manifest as manifests
from models.open_jev import checkpoint as ck
from models.open_jev import head
from models.qwen35 import export as qexport
from models.qwen35 import gate as qgate
from models.qwen35 import weights
from models.qwen35.dims import TextDims
from models.qwen35.export import load_dtype as _load_dtype

PACKAGE_FILES = ["model.json", "temperature.json", "head.pt", "adapter/*"]


def export(
    checkpoint: str,
    out: str,
    *,
    base: str | None = None,
    revision: str | None = None,
    subfolder: str | None = None,
    name: str | None = None,
    force: bool = False,
    dtype: str = "float32",
    gdn_kernel: str = "linear_attention",
    max_length: int = ck.MAX_LENGTH_DEFAULT,
    parity_gate: str = "enforce",
    gdn_plan: str = engines.DEFAULT,
    progress=print,
) -> dict:
    progress = progress or (lambda m: None)
    qgate.check_options(dtype, gdn_kernel, parity_gate)
    t0 = time.perf_counter()
    progress("[1/5] resolving package %s" % checkpoint)
    src = hub.resolve(checkpoint, PACKAGE_FILES, revision=revision, subfolder=subfolder)
    package = ck.read_package(src.path)
    variant = package.variant
    progress("      %s on %s@%s; resolving the base" % (variant.name, package.model_id, package.base_revision))
    base_src = hub.resolve(
        base or package.model_id, qexport.BASE_FILES, revision=None if base else package.base_revision
    )
    dims = TextDims.from_dir(base_src.path)
    served_name = name or variant.alias
    options = qexport.export_options({"name": served_name, "max_length": max_length}, dtype, gdn_kernel)
    progress("[2/5] hashing sources")
    sources = qexport.hash_sources(base_src.path, qexport.source_files(base_src.path), progress)
    sources.update(
        {
            "package/" + k: v
            for k, v in manifests.hash_files(
                src.path,
                [
                    "model.json",
                    "temperature.json",
                    "head.pt",
                    "adapter/adapter_config.json",
                    "adapter/adapter_model.safetensors",
                    "adapter/adapter_model.bin",
                ],
            ).items()
        }
    )
    if not force and export_dir.up_to_date(out, ck.FAMILY, sources, options, parity_gate):
        return export_dir.reuse(out, progress)

    meta_export = head.export_metadata(
        package, max_length, hidden_size=dims.hidden_size, checkpoint_revision=src.revision
    )
    progress(
        "[3/5] loading the text stack (%d layers, hidden %d) and merging the adapter"
        % (len(dims.layer_types), dims.hidden_size)
    )
    state = weights.load_text_state(base_src.path, _load_dtype(dtype))
    merged = weights.merge_lora(state, package.adapter_path)
    # A request's candidates repeat its state: the graph takes their common prompt head once a
    # pass (graph.SharedHead; the served adapter, models/qwen35/rows.SharedHeadAdapter).
    from models.qwen35.graph import SharedHead

    model = SharedHead(qexport.build_module(dims, state, "last", dtype, consume=True))
    del state
    progress("[4/5] exporting (%s, GDN kernel %s)" % (dtype, gdn_kernel))
    gate = functools.partial(
        qgate.run,
        kernel=gdn_kernel,
        mode=parity_gate,
        progress=progress,
        spend=True,
        gdn_plan=gdn_plan,
        distributions=qgate.noul_distributions(meta_export.head_weight, meta_export.head_bias, meta_export.temperature),
    )
    graph, check = qexport.write_export(out, model, gdn_kernel, progress, base_src.path, check=True, gate=gate)
    progress("[5/5] writing open_jev_export.json and the manifest")
    random = export_dir.flagged_random(os.path.join(src.path, "model.json"), os.path.join(base_src.path, "config.json"))
    meta = {
        "family": ck.FAMILY,
        "name": served_name,
        # `jev-latest` is the registry's (it names the default model); the rest route here.
        "aliases": [a for a in variant.names if a not in (served_name, "jev-latest")],
        "description": "Open-Jev %s: independent-candidate Yes/No scoring with a calibrated scalar head "
        "on %s" % (variant.name, package.model_id),
        "random_weights": random,
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "onnx": qexport.ONNX_NAME,
        "source": {
            "checkpoint": src.name,
            "revision": src.revision,
            "base": package.model_id,
            "base_revision": package.base_revision,
            "sha256": sources,
        },
        "dims": dims.as_dict(),
        "weights_dtype": dtype,
        "graph": graph,
        "check": check,
        "merged_modules": len(merged),
        "inputs": ["head_ids", "input_ids", "positions"],
        "outputs": ["hidden"],
        "export_options": options,
        "exporter": export_dir.exporter_info(qexport.OPSET),
    }
    ck.write_export_metadata(out, meta_export)
    export_dir.finalize(out, meta, hash_data=False)
    progress("exported %s to %s in %.1f s" % (served_name, out, time.perf_counter() - t0))
    return meta
