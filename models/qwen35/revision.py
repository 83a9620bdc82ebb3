"""The revision of the graph the Qwen3.5 exporter writes (torch-free: the server reads it too).

Every Qwen3.5 export records it in its options: an export of an earlier revision is not up to date,
so its export command writes it again, and the server names it at load (served.QwenServed.notes).
1: to 2026-12-01. 2: RoPE as RotaryEmbedding kernels, the attention's row lengths counted once a
pass, the GatedDeltaNet b and a gates from one product. 3 (2026-12-02): the GatedDeltaNet layers'
causal conv on channels-first data (gdn.conv_translation).
"""
GRAPH_REVISION = 3
GRAPH_REVISION_NOTE = ("the GatedDeltaNet layers' causal conv reads channels-first data, whose reads coalesce, "
                       "and, since revision 2, RoPE as one kernel and ~190 fewer kernels a Cua-S1 pass")
