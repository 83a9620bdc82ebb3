"""benchmarks/results/summary.py, which prints every published figure of docs/benchmarks.md,
run on the committed raw files: every part runs, every measured HTTP pass of every raw result
file is printed under its file's name, and every raw file or folder the docs cite exists."""

from __future__ import annotations

import contextlib
import glob
import gzip
import importlib.util
import io
import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def _summary():
    spec = importlib.util.spec_from_file_location("results_summary", RESULTS / "summary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _raw(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def _sections(text: str) -> dict[str, list[str]]:
    """The printed lines under each `### heading`."""
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("### "):
            current = out.setdefault(line[4:], [])
        elif current is not None and line.strip():
            current.append(line)
    return out


def test_every_part_prints_every_measured_pass_of_its_raw_files():
    summary = _summary()
    for part in summary.MODELS:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            summary.main([part])
        text = printed.getvalue()
        assert text.startswith("\n## %s" % part)
        if part == "tracing":
            assert re.search(r"mean \d+/s", text) and "p50" in text, text
            continue
        if part == "traffic":
            _check_traffic(_sections(text))
            continue
        sections = _sections(text)
        files = sorted(glob.glob(str(RESULTS / part / "run*" / "http*.json*")))
        assert files, part
        for path in files:
            raw = _raw(path)
            heading = "%s (%s)" % (pathlib.Path(path).relative_to(RESULTS), raw["workload"].rsplit("/", 1)[-1])
            rows = [line for line in sections[heading] if re.match(r"\d+\s*\|", line)]
            passes = [(level["concurrency"], p) for level in raw["levels"] for p in level["passes"]]
            assert len(rows) == len(passes), heading
            for row, (c, p) in zip(rows, passes):
                cells = [cell.strip() for cell in row.split("|")]
                assert int(cells[0]) == c
                assert float(cells[1]) == round(p["p50_ms"], 2) and float(cells[4]) == round(p["mean_ms"], 2)


def _check_traffic(sections: dict[str, list[str]]) -> None:
    """Every measured pass of every traffic run, under its run's heading, and each side's ratio to base."""
    runs = sorted(glob.glob(str(RESULTS / "traffic" / "*" / "")))
    assert runs
    for run in runs:
        heading = next(h for h in sections if h.startswith("traffic/%s " % pathlib.Path(run).name))
        lines = sections[heading]
        for path in sorted(glob.glob(run + "traffic-*.json")):
            raw = _raw(path)
            for level in raw["levels"]:
                printed = [line for line in lines if line.startswith("%s c=%d:" % (raw["label"], level["concurrency"]))]
                assert [re.search(r"(\d+) requests/s", line).group(1) for line in printed] == [
                    "%.0f" % p["requests_per_s"] for p in level["passes"]
                ]
            if not raw["label"].endswith("-base"):
                assert any(line.startswith(raw["label"] + " over base") for line in lines), raw["label"]


def test_every_raw_result_the_docs_cite_exists():
    cited = set()
    for doc in (ROOT / "docs").glob("*.md"):
        cited |= set(re.findall(r"benchmarks/results/[\w./-]*[\w/]", doc.read_text(encoding="utf-8")))
    assert len(cited) >= 5
    missing = sorted(c for c in cited if not (ROOT / c).exists())
    assert not missing, missing


def test_the_performance_anchors_the_docs_cite_are_in_the_repository():
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert "](reference/performance.md)" in text
    assert (
        (ROOT / "docs" / "reference" / "performance.md").read_text(encoding="utf-8").startswith("# Performance anchors")
    )
