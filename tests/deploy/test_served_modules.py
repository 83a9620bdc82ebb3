"""deploy/served_modules.py, which the Dockerfile copies models/ through: the runtime image holds
the modules serving imports and none of the export side that the import contracts forbid it,
and a real server runs from that copy alone and answers."""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import shutil
import tomllib

import httpx

from tests.server import ROOT, models_not_in_runtime, run_server


def _tool():
    spec = importlib.util.spec_from_file_location("served_modules", os.path.join(ROOT, "deploy", "served_modules.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _forbidden() -> list[str]:
    """The modules the import contracts forbid serving (pyproject.toml [tool.importlinter])."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    return [m for c in contracts if c["type"] == "forbidden" for m in c["forbidden_modules"]]


def test_the_image_holds_what_serving_imports_and_no_exporter():
    tool = _tool()
    served, every = tool.served_modules(ROOT), tool.all_modules(ROOT)
    # Every family the registry loads by name, and each one's preparation and finishing.
    from models.registry import FAMILIES

    assert set(FAMILIES.values()) <= served
    for family in ("laya", "cua_s1", "open_jev", "clef_flash"):
        assert {"models.%s.prepare" % family, "models.%s.finish" % family} <= served
    assert {"models.registry", "models.base", "models.manifest", "models.gdn_plan"} <= served
    forbidden = [m for m in served for pattern in _forbidden() if fnmatch.fnmatchcase(m, pattern)]
    assert not forbidden, forbidden
    for left_out in (
        "models.export",
        "models.laya.export",
        "models.qwen35.gate",
        "models.fold",
        "models.open_jev.head",
        "models.qwen35.bake",
        "models.demo",
    ):
        assert left_out in every - served
    assert set(models_not_in_runtime()) == every - served  # what every test server is denied


def test_a_server_runs_from_the_copy_alone(english, tmp_path):
    tree = tmp_path / "image"
    shutil.copytree(os.path.join(ROOT, "app"), tree / "app", ignore=shutil.ignore_patterns("__pycache__"))
    assert _tool().main([ROOT, str(tree)]) == 0
    copied = {os.path.relpath(os.path.join(d, n), tree) for d, _, names in os.walk(tree / "models") for n in names}
    assert "models/laya/served.py" in copied and "models/laya/export.py" not in copied
    assert "models/qwen35/rows.py" in copied and "models/qwen35/graph.py" not in copied
    # Granian puts its working directory first on sys.path: app and models come from the copy.
    with run_server(tmp_path, {"OMNI_MODELS": english[1]}, cwd=str(tree)) as server:
        r = httpx.post(
            server.url + "/v1/systemone",
            json={
                "state": "I was charged twice.",
                "questions": {
                    "refund": {"type": "noul", "instructions": "Refund?"},
                    "team": {"type": "choice", "instructions": "Which team?", "criteria": ["billing", "tech"]},
                },
            },
        )
        assert r.status_code == 200, r.text
        assert set(r.json()["answers"]) == {"refund", "team"}
        log = server.log()
    assert "runtime image leaves it out" not in log
