"""ONNX Runtime's own operators, declared so onnxscript can emit them from torch.onnx exports.

onnx ships no schemas for ONNX Runtime's kernels (the `com.microsoft` contrib ops and
`SimplifiedLayerNormalization` in the default domain). The custom-op translations of every model
(`models/qwen35/fused.py`, `models/qwen35/gdn.py`, `models/laya/fused.py`) build their nodes
through `opsets()`, which declares the signatures below once per process. The signatures are the
ones ONNX Runtime 1.31.1 registers; only the inputs, outputs and attributes we may emit matter
to onnxscript, ONNX Runtime checks the nodes against its own registry when it loads the graph.
"""

from __future__ import annotations

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
            attributes=[A("axis", integer), A("epsilon", real), A("stash_type", integer)],
        ),
        ("GroupQueryAttention", "com.microsoft"): dict(
            inputs=[
                P("query", "T"),
                P("key", "T", param_option=opt),
                P("value", "T", param_option=opt),
                P("past_key", "T", param_option=opt),
                P("past_value", "T", param_option=opt),
                P("seqlens_k", "M"),
                P("total_sequence_length", "M"),
            ],
            outputs=[
                P("output", "T"),
                P("present_key", "T", param_option=opt),
                P("present_value", "T", param_option=opt),
            ],
            type_constraints=[("T", FLOATS, ""), ("M", ["tensor(int32)"], "")],
            attributes=[A("num_heads", integer), A("kv_num_heads", integer), A("scale", real), A("causal", integer)],
        ),
        ("MultiHeadAttention", "com.microsoft"): dict(
            inputs=[
                P("query", "T"),
                P("key", "T", param_option=opt),
                P("value", "T", param_option=opt),
                P("bias", "T", param_option=opt),
                P("key_padding_mask", "M", param_option=opt),
                P("attention_bias", "T", param_option=opt),
            ],
            outputs=[P("output", "T")],
            type_constraints=[("T", FLOATS, ""), ("M", ["tensor(int32)"], "")],
            attributes=[
                A("num_heads", integer),
                A("scale", real),
                A("mask_filter_value", real),
                A("unidirectional", integer),
            ],
        ),
        ("RotaryEmbedding", "com.microsoft"): dict(
            inputs=[P("input", "T"), P("position_ids", "M"), P("cos_cache", "T"), P("sin_cache", "T")],
            outputs=[P("output", "T")],
            type_constraints=[("T", FLOATS, ""), ("M", ["tensor(int64)"], "")],
            attributes=[
                A("interleaved", integer),
                A("num_heads", integer),
                A("rotary_embedding_dim", integer),
                A("scale", real),
                A("is_packed_batching", integer),
            ],
        ),
        ("SkipLayerNormalization", "com.microsoft"): dict(
            inputs=[
                P("input", "T"),
                P("skip", "T"),
                P("gamma", "T"),
                P("beta", "T", param_option=opt),
                P("bias", "T", param_option=opt),
            ],
            # The normalised output, then ONNX Runtime's optional mean, inverse std and sum of
            # input and skip. onnxscript names all four; an export unnames those nothing reads
            # (`unname_unused`), so no provider computes them.
            outputs=[
                P("output", "T"),
                P("mean", "U", param_option=opt),
                P("inv_std_var", "U", param_option=opt),
                P("input_skip_bias_sum", "T", param_option=opt),
            ],
            type_constraints=[("T", FLOATS, ""), ("U", ["tensor(float)"], "")],
            attributes=[A("epsilon", real)],
        ),
        ("SkipSimplifiedLayerNormalization", "com.microsoft"): dict(
            inputs=[P("input", "T"), P("skip", "T"), P("gamma", "T"), P("bias", "T", param_option=opt)],
            # As SkipLayerNormalization's: the sum (output 3) carries a residual stream on.
            outputs=[
                P("output", "T"),
                P("mean", "U", param_option=opt),
                P("inv_std_var", "U", param_option=opt),
                P("input_skip_bias_sum", "T", param_option=opt),
            ],
            type_constraints=[("T", FLOATS, ""), ("U", ["tensor(float)"], "")],
            attributes=[A("epsilon", real)],
        ),
        ("BiasGelu", "com.microsoft"): dict(
            inputs=[P("A", "T"), P("B", "T")],
            outputs=[P("C", "T")],
            type_constraints=[("T", FLOATS, "")],
            attributes=[],
        ),
        ("CausalConvWithState", "com.microsoft"): dict(
            inputs=[
                P("input", "T"),
                P("weight", "T"),
                P("bias", "T", param_option=opt),
                P("past_state", "T", param_option=opt),
            ],
            outputs=[P("output", "T"), P("present_state", "T")],
            type_constraints=[("T", FLOATS, "")],
            attributes=[
                A("activation", string),
                A("channels_last", integer),
                A("ndim", integer),
                A("dilation", integer),
                A("state_window", integer),
            ],
        ),
        ("LinearAttention", "com.microsoft"): dict(
            inputs=[
                P("query", "T"),
                P("key", "T"),
                P("value", "T"),
                P("past_state", "S", param_option=opt),
                P("decay", "T", param_option=opt),
                P("beta", "T", param_option=opt),
            ],
            outputs=[P("output", "T"), P("present_state", "S")],
            type_constraints=[("T", FLOATS, ""), ("S", FLOATS, "")],
            attributes=[
                A("q_num_heads", integer),
                A("kv_num_heads", integer),
                A("update_rule", string),
                A("scale", real),
                A("chunk_size", integer),
                A("state_window", integer),
            ],
        ),
        ("GatedDeltaNet", "com.microsoft"): dict(
            inputs=[
                P("query", "T"),
                P("key", "T", param_option=opt),
                P("value", "T", param_option=opt),
                P("cu_seqlens", "TI", param_option=opt),
                P("decay", "TS", param_option=opt),
                P("beta", "TS", param_option=opt),
                P("initial_state", "TS", param_option=opt),
                P("a_log", "TS", param_option=opt),
                P("dt_bias", "TS", param_option=opt),
                P("capture_count", "TI", param_option=opt),
                P("state_update_active", "TI", param_option=opt),
            ],
            outputs=[P("output", "T"), P("final_state", "TS"), P("state_update", "TS", param_option=opt)],
            type_constraints=[("T", FLOATS, ""), ("TS", ["tensor(float)"], ""), ("TI", ["tensor(int32)"], "")],
            attributes=[
                A("qk_l2_norm", integer),
                A("update_rule", string),
                A("scale", real),
                A("chunk_size", integer),
                A("beta_activation", string),
                A("gate_activation", string),
                A("state_update_capacity", integer),
            ],
        ),
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
