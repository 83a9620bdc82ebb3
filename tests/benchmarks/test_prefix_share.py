"""benchmarks.prefix_share: the tokens a shared prefix spares, counted on rows as a real Open-Jev
export's preparation builds them."""

from __future__ import annotations

import json
import os

import pytest

from benchmarks import prefix_share


def test_spared_runs_each_groups_prefix_once():
    head = list(range(10))
    groups = [[head + [100], head + [101, 102]], [[1, 2, 3]]]
    run, shared = prefix_share.spared(groups)
    assert run == 11 + 12 + 3
    assert shared == 10 + 1 + 2 + 3


@pytest.fixture(scope="module")
def jev(tmp_path_factory):
    pytest.importorskip("peft")
    from models.open_jev import export, random_checkpoint

    root = tmp_path_factory.mktemp("prefix-share")
    package = random_checkpoint.build(str(root / "pkg"), "9b", seed=5)
    out = str(root / "export")
    export.export(package, out, base=os.path.join(os.path.dirname(package), "base"), progress=None)
    return out


def test_counts_on_open_jev_candidates(jev, tmp_path, capsys):
    from models.registry import load

    model = load(jev)
    state = " ".join("word%d" % i for i in range(300))
    choice = {"type": "choice", "instructions": "Which?", "criteria": {"a": "first", "b": "second", "c": "third"}}
    bodies = [
        {"model": model.name, "state": state, "questions": {"q": choice}},
        {"model": model.name, "state": state, "questions": {"n": {"type": "noul", "instructions": "Asked?"}}},
        {
            "model": model.name,
            "state": state,
            "questions": {"q": choice, "n": {"type": "noul", "instructions": "Asked?"}},
        },
    ]
    workload = tmp_path / "w.jsonl"
    workload.write_text("".join(json.dumps(b) + "\n" for b in bodies), encoding="utf-8")
    prefix_share.main(["--export", jev, "--workload", str(workload), "--out", str(tmp_path / "s.json")])
    report = json.loads(capsys.readouterr().out)
    assert report == json.loads((tmp_path / "s.json").read_text())
    rows = [model.prepare(b).work for b in bodies]
    assert report["rows"] == 3 + 1 + 4
    assert report["tokens_run"] == sum(len(r) for work in rows for r in work)
    assert report["ratio_per_request"] > 2  # the 300-word state runs twice, not seven times
    # The lone noul spares nothing; the choice's candidates run the state once, so each adds only
    # its own tail (the option and the chat turn's end: a few dozen tokens).
    lone, choice_only = (prefix_share.count(model, [b]) for b in bodies[:2][::-1])
    assert lone["tokens_shared_per_request"] == lone["tokens_run"] == len(rows[1][0])
    longest = max(len(r) for r in rows[0])
    assert longest < choice_only["tokens_shared_per_request"] < longest + 2 * 40
    # Split by question, the third request's noul keeps its own copy of the state.
    assert report["tokens_shared_per_question"] - report["tokens_shared_per_request"] > 300


def test_a_model_whose_work_is_not_token_rows_is_refused(english, tmp_path):
    workload = tmp_path / "w.jsonl"
    from models.registry import load

    body = {"model": load(english[1]).name, "state": "s", "questions": {"q": {"type": "noul", "instructions": "x?"}}}
    workload.write_text(json.dumps(body) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not a list of token rows"):
        prefix_share.main(["--export", english[1], "--workload", str(workload)])
