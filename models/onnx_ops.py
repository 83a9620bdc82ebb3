"""ONNX Runtime's own operators, declared so onnxscript can emit them from torch.onnx exports.

onnx ships no schemas for ONNX Runtime's kernels (the `com.microsoft` contrib ops and
`SimplifiedLayerNormalization` in the default domain). The custom-op translations of every model
(`models/qwen35/fused.py`, `models/qwen35/gdn.py`, `models/laya/fused.py`) build their nodes
through `opsets()`, which declares the signatures below once per process. The signatures are the
ones ONNX Runtime 1.31.1 registers; only the inputs, outputs and attributes we may emit matter
to onnxscript, ONNX Runtime checks the nodes against its own registry when it loads the graph.
"""
from __future__ import annotations

import contextlib
import os

FLOATS = ["tensor(float)", "tensor(float16)", "tensor(bfloat16)"]


def opsets():
    """(com.microsoft, default-domain) onnxscript opsets, with the schemas registered."""
    from onnxscript.values import Opset

    register()
    return Opset("com.microsoft", 1), Opset("", 18)


def register() -> None:
    from onnx import defs

    P = defs.OpSchema.FormalParameter
    # Every attribute optional, as in ONNX Runtime's own schemas (each has a default there); a
    # required one would make onnx.checker refuse nodes that leave it at its default.

    def A(name, kind):
        return defs.OpSchema.Attribute(name, kind, "", required=False)
    opt = defs.OpSchema.FormalParameterOption.Optional
    string, integer, real = defs.OpSchema.AttrType.STRING, defs.OpSchema.AttrType.INT, defs.OpSchema.AttrType.FLOAT
    schemas = {
        ("SimplifiedLayerNormalization", ""): dict(
            inputs=[P("X", "T"), P("scale", "V")],
            outputs=[P("Y", "V"), P("inv_std_var", "U", param_option=opt)],
            type_constraints=[("T", FLOATS, ""), ("V", FLOATS, ""), ("U", ["tensor(float)"], "")],
            attributes=[A("axis", integer), A("epsilon", real), A("stash_type", integer)]),
        ("GroupQueryAttention", "com.microsoft"): dict(
            inputs=[P("query", "T"), P("key", "T", param_option=opt), P("value", "T", param_option=opt),
                    P("past_key", "T", param_option=opt), P("past_value", "T", param_option=opt),
                    P("seqlens_k", "M"), P("total_sequence_length", "M")],
            outputs=[P("output", "T"), P("present_key", "T", param_option=opt),
                     P("present_value", "T", param_option=opt)],
            type_constraints=[("T", FLOATS, ""), ("M", ["tensor(int32)"], "")],
            attributes=[A("num_heads", integer), A("kv_num_heads", integer), A("scale", real),
                        A("causal", integer)]),
        ("MultiHeadAttention", "com.microsoft"): dict(
            inputs=[P("query", "T"), P("key", "T", param_option=opt), P("value", "T", param_option=opt),
                    P("bias", "T", param_option=opt), P("key_padding_mask", "M", param_option=opt),
                    P("attention_bias", "T", param_option=opt)],
            outputs=[P("output", "T")],
            type_constraints=[("T", FLOATS, ""), ("M", ["tensor(int32)"], "")],
            attributes=[A("num_heads", integer), A("scale", real), A("mask_filter_value", real),
                        A("unidirectional", integer)]),
        ("RotaryEmbedding", "com.microsoft"): dict(
            inputs=[P("input", "T"), P("position_ids", "M"), P("cos_cache", "T"), P("sin_cache", "T")],
            outputs=[P("output", "T")],
            type_constraints=[("T", FLOATS, ""), ("M", ["tensor(int64)"], "")],
            attributes=[A("interleaved", integer), A("num_heads", integer), A("rotary_embedding_dim", integer),
                        A("scale", real), A("is_packed_batching", integer)]),
        ("SkipLayerNormalization", "com.microsoft"): dict(
            inputs=[P("input", "T"), P("skip", "T"), P("gamma", "T"), P("beta", "T", param_option=opt),
                    P("bias", "T", param_option=opt)],
            # The normalised output, then ONNX Runtime's optional mean, inverse std and sum of
            # input and skip. onnxscript names all four; an export unnames those nothing reads
            # (`unname_unused`), so no provider computes them.
            outputs=[P("output", "T"), P("mean", "U", param_option=opt), P("inv_std_var", "U", param_option=opt),
                     P("input_skip_bias_sum", "T", param_option=opt)],
            type_constraints=[("T", FLOATS, ""), ("U", ["tensor(float)"], "")],
            attributes=[A("epsilon", real)]),
        ("SkipSimplifiedLayerNormalization", "com.microsoft"): dict(
            inputs=[P("input", "T"), P("skip", "T"), P("gamma", "T"), P("bias", "T", param_option=opt)],
            # As SkipLayerNormalization's: the sum (output 3) carries a residual stream on.
            outputs=[P("output", "T"), P("mean", "U", param_option=opt), P("inv_std_var", "U", param_option=opt),
                     P("input_skip_bias_sum", "T", param_option=opt)],
            type_constraints=[("T", FLOATS, ""), ("U", ["tensor(float)"], "")],
            attributes=[A("epsilon", real)]),
        ("Gelu", "com.microsoft"): dict(
            inputs=[P("X", "T")], outputs=[P("Y", "T")], type_constraints=[("T", FLOATS, "")], attributes=[]),
        ("CausalConvWithState", "com.microsoft"): dict(
            inputs=[P("input", "T"), P("weight", "T"), P("bias", "T", param_option=opt),
                    P("past_state", "T", param_option=opt)],
            outputs=[P("output", "T"), P("present_state", "T")],
            type_constraints=[("T", FLOATS, "")],
            attributes=[A("activation", string), A("channels_last", integer), A("ndim", integer),
                        A("dilation", integer), A("state_window", integer)]),
        ("LinearAttention", "com.microsoft"): dict(
            inputs=[P("query", "T"), P("key", "T"), P("value", "T"), P("past_state", "S", param_option=opt),
                    P("decay", "T", param_option=opt), P("beta", "T", param_option=opt)],
            outputs=[P("output", "T"), P("present_state", "S")],
            type_constraints=[("T", FLOATS, ""), ("S", FLOATS, "")],
            attributes=[A("q_num_heads", integer), A("kv_num_heads", integer), A("update_rule", string),
                        A("scale", real), A("chunk_size", integer), A("state_window", integer)]),
        ("GatedDeltaNet", "com.microsoft"): dict(
            inputs=[P("query", "T"), P("key", "T", param_option=opt), P("value", "T", param_option=opt),
                    P("cu_seqlens", "TI", param_option=opt), P("decay", "TS", param_option=opt),
                    P("beta", "TS", param_option=opt), P("initial_state", "TS", param_option=opt),
                    P("a_log", "TS", param_option=opt), P("dt_bias", "TS", param_option=opt),
                    P("capture_count", "TI", param_option=opt), P("state_update_active", "TI", param_option=opt)],
            outputs=[P("output", "T"), P("final_state", "TS"), P("state_update", "TS", param_option=opt)],
            type_constraints=[("T", FLOATS, ""), ("TS", ["tensor(float)"], ""), ("TI", ["tensor(int32)"], "")],
            attributes=[A("qk_l2_norm", integer), A("update_rule", string), A("scale", real),
                        A("chunk_size", integer), A("beta_activation", string), A("gate_activation", string),
                        A("state_update_capacity", integer)]),
    }
    for (name, domain), spec in schemas.items():
        if not defs.has(name, domain):
            defs.register_schema(defs.OpSchema(name, domain, 1, **spec))


SKIP_NORMS = ("SkipLayerNormalization", "SkipSimplifiedLayerNormalization")


def unname_unused(path: str, op_types=SKIP_NORMS) -> None:
    """Unname the optional outputs (1 on) of each node of `op_types` that no node and no graph
    output reads, in the graph at `path`, in place: a named output is one a provider computes."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    read = {name for node in model.graph.node for name in node.input} | {o.name for o in model.graph.output}
    changed = False
    for node in model.graph.node:
        if node.op_type not in op_types:
            continue
        outputs = [name if i == 0 or name in read else "" for i, name in enumerate(node.output)]
        while len(outputs) > 1 and not outputs[-1]:
            outputs.pop()
        if outputs != list(node.output):
            del node.output[:]
            node.output.extend(outputs)
            changed = True
    if changed:
        onnx.save(model, path)


# ONNX Runtime's chunked GatedDeltaNet engines take float16 inputs only (their matrix operands
# are fp16 fragments; its source leaves bfloat16 unwritten): forced onto another graph, such as
# the float32 export a half-precision one that failed its gate falls back to, every pass fails
# ("chunked engine requires float16 input"). ONNX Runtime's own choice serves the other dtypes
# with its recurrent engine.
FLOAT16_ONLY_GDN_PLANS = ("chunked", "chunked_split")


def gdn_plan_for(plan: str, gdn_dtype: str) -> str:
    """The GatedDeltaNet engine to build a graph's InferenceSession with: `plan`, unless it takes
    float16 only and the graph's GatedDeltaNet layers read another dtype; then ONNX Runtime's own
    ("auto")."""
    return "auto" if plan in FLOAT16_ONLY_GDN_PLANS and gdn_dtype != "float16" else plan


def gdn_plan_note(manifest: dict, configured: str, plan: str) -> str | None:
    """Why an export's GatedDeltaNet layers do not run the configured engine, for the log; None
    when they do or the export has none of ONNX Runtime's GatedDeltaNet nodes."""
    graph = manifest.get("graph", {})
    if plan == configured or not graph.get("gdn_kernel", "").startswith("gated_delta_net"):
        return None
    dtype = gdn_dtype(manifest)
    note = "its GatedDeltaNet layers read %s: they run ONNX Runtime's own engine, not %s (float16 only)" % (
        dtype, configured)
    if dtype == "bfloat16":         # a bfloat16 graph whose export fed its GatedDeltaNet layers bfloat16
        note += ("; the exporter feeds them float16: running its export command again serves it on %s, "
                 "faster" % configured)
    return note


def gdn_dtype(manifest: dict) -> str:
    """The dtype an export's GatedDeltaNet layers read: what its manifest records (a bfloat16
    graph may feed them float16), else its weights' dtype (a manifest without the record)."""
    return manifest.get("graph", {}).get("gdn_dtype") or manifest.get("weights_dtype", "float32")


@contextlib.contextmanager
def gdn_plan(plan: str):
    """ORT_GDN_PLAN as `plan` ("auto": unset) while a session is built: ONNX Runtime's
    GatedDeltaNet kernel reads it once, when an InferenceSession creates its kernels. Build
    sessions one at a time under it (the server builds them on its executor thread), since it
    sets the process's variable."""
    before = os.environ.get("ORT_GDN_PLAN")
    if plan == "auto":
        os.environ.pop("ORT_GDN_PLAN", None)
    else:
        os.environ["ORT_GDN_PLAN"] = plan
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("ORT_GDN_PLAN", None)
        else:
            os.environ["ORT_GDN_PLAN"] = before
