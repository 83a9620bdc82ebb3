"""An Open-Jev export under a name of its own (`python -m models.export open-jev --name X`, what
compose's `X=open-jev:checkpoint` entries write) answers requests that name X, over HTTP."""

from __future__ import annotations

import os

import httpx
import pytest

from tests.conftest import run_server

SHORT = {
    "state": "Short.",
    "questions": {"q": {"type": "choice", "instructions": "Pick one.", "criteria": {"a": "First", "b": "Second"}}},
}


@pytest.mark.slow  # an export of its own, then a server
def test_a_custom_named_export_answers_to_its_name(package, tmp_path):
    from models import manifest
    from models.open_jev import export

    out = str(tmp_path / "judge")
    export.export(package, out, base=os.path.join(os.path.dirname(package), "base"), name="judge", progress=None)
    meta = manifest.read(out)
    assert meta["name"] == "judge" and "open-jev-9b" in meta["aliases"]
    with run_server(tmp_path, {"OMNI_MODELS": out}) as server:

        def ask(model):
            return httpx.post(server.url + "/v1/systemone", json=dict(SHORT, model=model), timeout=60)

        for name in ("judge", " JUDGE ", "open-jev-9b", "open-jev", "jev-latest"):
            r = ask(name)
            assert r.status_code == 200, (name, r.text)
            assert r.json()["model"] == "Qwen/Qwen3.5-9B"  # upstream's response `model`
        r = ask("open-jev-27b-v1.1")
        assert r.status_code == 422 and r.json()["code"] == "unknown_model"
