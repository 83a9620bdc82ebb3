"""The revision of the graph the Qwen3.5 exporter writes (torch-free: the server reads it too).

Every Qwen3.5 export records it in its options: an export of a lower revision is not up to date,
so its export command writes it again, and the server names it at load (served.QwenServed.notes).
The current revision's graph runs RoPE as RotaryEmbedding kernels, counts the attention's row
lengths once a pass and computes the GatedDeltaNet b and a gates in one product.
"""

GRAPH_REVISION = 2
GRAPH_REVISION_NOTE = (
    "RoPE as one kernel, the attention's row lengths once a pass and the GatedDeltaNet gates "
    "from one product: fewer kernels a pass"
)
