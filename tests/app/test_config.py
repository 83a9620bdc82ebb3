"""Settings from OMNI_* variables over an optional TOML/JSON file."""
from __future__ import annotations

import json
import os

import pytest

from app.config import Settings


def test_defaults_and_env():
    s = Settings.from_env({})
    assert s.models == () and s.profile == "reference" and s.max_body_bytes == 8 * 1024 * 1024
    s = Settings.from_env({"OMNI_MODELS": "a, b" + os.pathsep + "c", "OMNI_PROFILE": "jev",
                           "OMNI_MAX_BATCH_ROWS": "32", "OMNI_BATCH_WINDOW_MS": "1.5", "OMNI_API_KEY": "k"})
    assert s.models == ("a", "b", "c") and s.profile == "jev"
    assert s.max_batch_rows == 32 and s.batch_window_ms == 1.5 and s.api_key == "k"


def test_file_then_env_overrides(tmp_path):
    toml = tmp_path / "omni.toml"
    toml.write_text('models = ["exports/english"]\nprofile = "jev"\nqueue_size = 7\n')
    s = Settings.from_env({"OMNI_CONFIG": str(toml), "OMNI_QUEUE_SIZE": "9"})
    assert s.models == ("exports/english",) and s.profile == "jev" and s.queue_size == 9
    js = tmp_path / "omni.json"
    js.write_text(json.dumps({"device": "cpu", "request_timeout_s": 5}))
    assert Settings.from_env({"OMNI_CONFIG": str(js)}).request_timeout_s == 5.0


@pytest.mark.parametrize("env", [{"OMNI_PROFILE": "openai"}, {"OMNI_QUEUE_SIZE": "0"},
                                 {"OMNI_MAX_BODY_BYTES": "-1"}])
def test_invalid_settings_are_refused(env):
    with pytest.raises(ValueError):
        Settings.from_env(env)


def test_bare_names_resolve_under_the_model_root():
    s = Settings.from_env({"OMNI_MODELS": "english,/abs/other", "OMNI_MODEL_ROOT": "/models"})
    assert s.model_dirs() == ["/models/english", "/abs/other"]
    assert Settings.from_env({"OMNI_MODELS": "exports/english"}).model_dirs() == ["exports/english"]


def test_switches_read_the_usual_spellings():
    assert Settings.from_env({}).cuda_graph_precapture is True
    for raw, value in (("0", False), ("false", False), ("Off", False), ("no", False), ("1", True), ("on", True)):
        assert Settings.from_env({"OMNI_CUDA_GRAPH_PRECAPTURE": raw}).cuda_graph_precapture is value
    with pytest.raises(ValueError, match="OMNI_CUDA_GRAPH_PRECAPTURE"):
        Settings.from_env({"OMNI_CUDA_GRAPH_PRECAPTURE": "maybe"})
