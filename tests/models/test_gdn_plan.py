"""models.gdn_plan for a graph that takes a prompt head per pass: its sessions get ONNX Runtime's
own engine choice whatever is configured, and the log says why."""

from __future__ import annotations

from models import gdn_plan


def test_a_shared_head_graph_runs_onnx_runtimes_own_engine_choice():
    shared = {"weights_dtype": "float16", "graph": {"gdn_kernel": "gated_delta_net_fused", "shared_head": True}}
    plain = {"weights_dtype": "float16", "graph": {"gdn_kernel": "gated_delta_net_fused"}}
    assert gdn_plan.shared_head(shared) and not gdn_plan.shared_head(plain) and not gdn_plan.shared_head({})
    for configured in gdn_plan.PLANS:
        assert gdn_plan.plan_for(configured, "float16", shared_head=True) == "auto"
    assert gdn_plan.plan_for("chunked_split", "float16") == "chunked_split"
    note = gdn_plan.plan_note(shared, "chunked_split", gdn_plan.plan_for("chunked_split", "float16", True))
    assert note is not None and "prompt head per pass" in note and "chunked_split" in note
    assert gdn_plan.plan_note(plain, "chunked_split", "chunked_split") is None
    assert gdn_plan.plan_note(shared, "auto", "auto") is None  # configured as it runs: nothing to say
