"""Settings from OMNI_* variables over an optional TOML/JSON file."""

from __future__ import annotations

import json
import os

import pytest

from app.config import OTHER_VARIABLES, ConfigError, Settings


def test_defaults_and_env():
    s = Settings.from_env({})
    assert s.models == () and s.profile == "reference" and s.max_body_bytes == 8 * 1024 * 1024
    s = Settings.from_env(
        {
            "OMNI_MODELS": "a, b" + os.pathsep + "c",
            "OMNI_PROFILE": "jev",
            "OMNI_MAX_BATCH_ROWS": "32",
            "OMNI_API_KEY": "k",
        }
    )
    assert s.models == ("a", "b", "c") and s.profile == "jev"
    assert s.max_batch_rows == 32 and s.api_key == "k"


def test_file_then_env_overrides(tmp_path):
    toml = tmp_path / "omni.toml"
    toml.write_text('models = ["exports/english"]\nprofile = "jev"\nqueue_size = 7\n')
    s = Settings.from_env({"OMNI_CONFIG": str(toml), "OMNI_QUEUE_SIZE": "9"})
    assert s.models == ("exports/english",) and s.profile == "jev" and s.queue_size == 9
    js = tmp_path / "omni.json"
    js.write_text(json.dumps({"device": "cpu", "request_timeout_s": 5, "api_key": None}))
    assert Settings.from_env({"OMNI_CONFIG": str(js)}).request_timeout_s == 5.0


@pytest.mark.parametrize("env", [{"OMNI_PROFILE": "openai"}, {"OMNI_QUEUE_SIZE": "0"}, {"OMNI_MAX_BODY_BYTES": "-1"}])
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


def test_a_bad_value_names_its_variable_or_key(tmp_path):
    with pytest.raises(ConfigError, match=r"^OMNI_QUEUE_SIZE must be a whole number, got 'many'$"):
        Settings.from_env({"OMNI_QUEUE_SIZE": "many"})
    with pytest.raises(ConfigError, match=r"^OMNI_BODY_TIMEOUT_S must be a number above 0, got -1.0$"):
        Settings.from_env({"OMNI_BODY_TIMEOUT_S": "-1"})
    with pytest.raises(ConfigError, match=r"^OMNI_DEVICE must be auto, cpu, cuda or cuda:N, got 'gpu'$"):
        Settings.from_env({"OMNI_DEVICE": "gpu"})
    toml = tmp_path / "omni.toml"
    toml.write_text('queue_size = "many"\n')
    with pytest.raises(ConfigError, match="key 'queue_size' in %s must be a whole number" % toml):
        Settings.from_env({"OMNI_CONFIG": str(toml)})
    toml.write_text("queue_size = true\n")
    with pytest.raises(ConfigError, match="must be a whole number, got True"):
        Settings.from_env({"OMNI_CONFIG": str(toml)})
    with pytest.raises(ConfigError, match="OMNI_CONFIG=%s cannot be read" % (tmp_path / "none.toml")):
        Settings.from_env({"OMNI_CONFIG": str(tmp_path / "none.toml")})
    toml.write_text("queue_size = \n")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        Settings.from_env({"OMNI_CONFIG": str(toml)})


def test_unknown_variables_and_keys_are_refused_with_a_suggestion(tmp_path):
    typos = r"unknown variables OMNI_DEVIC \(did you mean OMNI_DEVICE\?\), OMNI_WHATEVER;"
    with pytest.raises(ConfigError, match=typos):
        Settings.from_env({"OMNI_DEVIC": "cpu", "OMNI_WHATEVER": "1"})
    js = tmp_path / "omni.json"
    js.write_text(json.dumps({"modles": ["a"]}))
    with pytest.raises(ConfigError, match=r"unknown key in OMNI_CONFIG=.*: modles \(did you mean models\?\)"):
        Settings.from_env({"OMNI_CONFIG": str(js)})


def test_the_projects_other_variables_pass():
    """The export image's, make serve's and the image test's variables share an environment with
    the server (compose, a shell): known, and not the server's."""
    env = {name: "x" for name in OTHER_VARIABLES if name != "OMNI_CONFIG"}
    assert Settings.from_env(env) == Settings()
    assert "OMNI_EXPORT_DTYPE" in OTHER_VARIABLES and "OMNI_DEMO_DIR" in OTHER_VARIABLES


def test_retry_after_is_at_least_one_second():
    with pytest.raises(ConfigError, match="OMNI_RETRY_AFTER_S"):
        Settings.from_env({"OMNI_RETRY_AFTER_S": "0"})
    with pytest.raises(ConfigError, match="OMNI_RETRY_AFTER_S"):
        Settings(retry_after_s=0)


def test_export_entries_name_the_directory_the_export_wrote():
    """`name=checkpoint` and `name=family:checkpoint` (deploy/export.sh) serve `name`; the `:` of a
    family prefix does not split the entry."""
    s = Settings.from_env(
        {"OMNI_MODELS": "english=demo, mine=open-jev:org/ckpt,multilingual:exports/x", "OMNI_MODEL_ROOT": "/models"}
    )
    assert s.models == ("english=demo", "mine=open-jev:org/ckpt", "multilingual", "exports/x")
    assert s.model_dirs() == ["/models/english", "/models/mine", "/models/multilingual", "exports/x"]


def test_the_reference_table_in_the_docs_is_made_from_the_settings():
    import os

    from app.config import reference_table

    with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "configuration.md"), encoding="utf-8") as f:
        text = f.read()
    documented = text.split("<!-- settings: begin -->\n", 1)[1].split("<!-- settings: end -->", 1)[0]
    assert documented == reference_table(), "run `python -m app.config` and paste its table into docs/configuration.md"
