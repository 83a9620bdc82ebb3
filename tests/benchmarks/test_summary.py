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
