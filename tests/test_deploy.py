"""Container files: hadolint-clean Dockerfile; the compose stack wired as documented."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
import yaml

from tests.conftest import ROOT


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_multi_constructor("!", lambda loader, tag, node: {"tag": tag})  # Compose's !reset


def _compose(name):
    with open(os.path.join(ROOT, name)) as f:
        return yaml.load(f, Loader=_Loader)


def test_dockerfile_is_hadolint_clean():
    hadolint = shutil.which("hadolint") or os.path.join(os.path.dirname(os.sys.executable), "hadolint")
    proc = subprocess.run([hadolint, os.path.join(ROOT, "Dockerfile")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_compose_stack():
    c = _compose("compose.yaml")
    assert {"export", "server", "otel-collector", "tempo", "prometheus", "grafana"} <= set(c["services"])
    server = c["services"]["server"]
    assert server["depends_on"]["export"]["condition"] == "service_completed_successfully"
    # The observability stack is a profile: without it the server runs alone.
    assert server["depends_on"]["otel-collector"] == {"condition": "service_started", "required": False}
    for name in ("otel-collector", "tempo", "prometheus", "grafana"):
        assert c["services"][name]["profiles"] == ["observability"], name
    assert "profiles" not in server and "profiles" not in c["services"]["export"]
    assert "models:/models:ro" in server["volumes"]
    assert all(p.startswith("127.0.0.1:") for s in c["services"].values() for p in s.get("ports", []))
    assert "/readyz" in " ".join(server["healthcheck"]["test"])
    assert int(server["stop_grace_period"].rstrip("s")) > 30
    assert server["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    assert (
        server["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"]
        == "${OTEL_EXPORTER_OTLP_ENDPOINT:-http://otel-collector:4318}"
    )
    assert server["environment"]["OTEL_SDK_DISABLED"] == "${OTEL_SDK_DISABLED:-false}"  # the operator's switch
    export = c["services"]["export"]
    assert export["environment"]["OMNI_MODELS"] == server["environment"]["OMNI_MODELS"]
    # The GPU stack exports what it serves fastest, gated on the GPU it is served on.
    assert export["deploy"] == server["deploy"]
    assert export["environment"]["OMNI_EXPORT_DTYPE"] == "${OMNI_EXPORT_DTYPE:-float16}"
    assert export["environment"]["OMNI_LAYA_EXPORT_DTYPE"] == "${OMNI_LAYA_EXPORT_DTYPE:-float16}"
    assert export["environment"]["OMNI_GDN_KERNEL"] == "${OMNI_GDN_KERNEL:-gated_delta_net_fused}"
    cpu = _compose("compose.cpu.yaml")["services"]
    assert cpu["server"]["deploy"] == {"tag": "reset"} and cpu["server"]["build"]["args"]["ORT_EXTRA"] == "cpu"
    # The CPU images have tags of their own: building them never replaces the GPU stack's.
    for name in ("server", "export"):
        assert cpu[name]["image"] == c["services"][name]["image"] + "-cpu", name
    # ...and the CPU stack the portable graphs, with no GPU asked for.
    assert cpu["export"]["deploy"] == {"tag": "reset"}
    assert cpu["export"]["environment"]["OMNI_EXPORT_DTYPE"] == "${OMNI_EXPORT_DTYPE:-float32}"
    assert cpu["export"]["environment"]["OMNI_GDN_KERNEL"] == "${OMNI_GDN_KERNEL:-linear_attention}"
    # One OMNI_MODELS for both: the server serves a `name=source` entry's `name` (app/config.py).
    assert cpu["export"]["environment"]["OMNI_MODELS"] == cpu["server"]["environment"]["OMNI_MODELS"]
    for path in (
        "deploy/otel/collector.yaml",
        "deploy/tempo.yaml",
        "deploy/grafana/dashboards/system1-omni.json",
        "deploy/grafana/provisioning/dashboards/omni.yaml",
        "deploy/export.sh",
    ):
        assert os.path.exists(os.path.join(ROOT, path)), path


def _stages(path):
    """Dockerfile stages in order: (name, parent, instruction lines), continuation lines joined."""
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    stages = []
    for line in text.splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0].upper() == "FROM":
            name = words[3] if len(words) > 3 and words[2].upper() == "AS" else None
            stages.append((name, words[1], []))
        elif stages:
            stages[-1][2].append(line)
    return stages


def test_every_stage_that_installs_from_the_wheelhouse_has_it():
    """An offline build (PIP_OFFLINE=1) installs from /wheelhouse only, so each stage whose pip
    reads it must have it: copied in, or inherited from the stage it is built from."""
    has, readers = {}, []
    for name, parent, lines in _stages(os.path.join(ROOT, "Dockerfile")):
        here = has.get(parent, False) or any(line.startswith("COPY") and "/wheelhouse" in line for line in lines)
        has[name] = here
        if any(line.startswith("RUN") and "--find-links /wheelhouse" in line for line in lines):
            readers.append(name)
            assert here, "stage %s installs from /wheelhouse but has none" % name
    assert {"deps", "export-deps"} <= set(readers)


def test_the_images_label_their_release_after_every_layer():
    """VERSION and REVISION change with every release: declared after the last layer of each image
    stage, they leave every layer of the build before cached, and a registry's copy reused."""
    for name, _, lines in _stages(os.path.join(ROOT, "Dockerfile")):
        if name not in ("runtime", "export"):
            continue
        kinds = [line.split()[0].upper() for line in lines]
        last_layer = max(i for i, kind in enumerate(kinds) if kind in ("COPY", "RUN", "ADD"))
        release = [i for i, line in enumerate(lines) if "VERSION" in line or "REVISION" in line]
        assert release and min(release) > last_layer, (name, lines)


def test_export_script_knows_the_published_names(tmp_path):
    """The export entrypoint maps names to checkpoints and refuses unknown names before work."""
    env = {**os.environ, "OMNI_MODELS": "nonexistent", "OMNI_MODEL_ROOT": str(tmp_path)}
    proc = subprocess.run(["sh", os.path.join(ROOT, "deploy", "export.sh")], env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and "no published checkpoint is named nonexistent" in proc.stderr


def _stand_in_python(tmp_path, then: str = ""):
    """(a bin folder to put first on PATH, the file it records into): its `python` appends each
    call's arguments to that file instead of running anything, then runs the shell line `then`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.txt"
    (bin_dir / "python").write_text('#!/bin/sh\necho "$@" >> %s\n%s' % (calls, then))
    (bin_dir / "python").chmod(0o755)
    return bin_dir, calls


def test_export_script_maps_each_family_to_its_exporter(tmp_path):
    """Each published name (and name=family:checkpoint) becomes the right exporter call, pinned;
    a stand-in `python` first on PATH records the calls instead of downloading anything."""
    bin_dir, calls = _stand_in_python(tmp_path)
    env = {
        **os.environ,
        "PATH": "%s:%s" % (bin_dir, os.environ["PATH"]),
        "OMNI_MODEL_ROOT": str(tmp_path),
        "OMNI_MODELS": "cua-s1-4b-0.2,open-jev-9b,clef-flash,mine=open-jev:/ck/pkg,english",
        "OMNI_EXPORT_DTYPE": "float16",
    }
    proc = subprocess.run(["sh", os.path.join(ROOT, "deploy", "export.sh")], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = calls.read_text().splitlines()
    assert lines[0].startswith("-m models.export cua-s1 --checkpoint Qwen/Qwen3.5-4B ")
    assert "--revision 851bf6e806efd8d0a36b00ddf55e13ccb7b8cd0a" in lines[0]
    assert "--adapter cua-ai/cua-s1-4b-0.2/text" in lines[0] and lines[0].endswith("--dtype float16")
    assert "--gdn-kernel linear_attention" in lines[0]  # the script's own default: portable
    assert lines[1].startswith("-m models.export open-jev --checkpoint ZefanCai/Open-Jev-9B/package/checkpoint ")
    assert lines[2].startswith("-m models.export clef-flash --checkpoint Cloudflare/clef-flash ")
    assert lines[3].startswith("-m models.export open-jev --checkpoint /ck/pkg --publish %s/mine" % tmp_path)
    assert "--revision" not in lines[3]  # a local directory: its version is its content's hash
    assert lines[4].startswith("-m models.export laya --checkpoint convaiinnovations/laya ")
    assert "--revision 55cf4c4ebb4ebe31b2550e8bdf3bd21b99753851" in lines[4]  # Laya pinned too
    assert lines[4].endswith("--dtype float32")  # OMNI_EXPORT_DTYPE is the Qwen families'


def _script_pins(tmp_path, **env_extra) -> dict[str, str]:
    """Each published name's `--revision`, as deploy/export.sh calls the exporter."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp_path / "calls.txt"
    calls.unlink(missing_ok=True)
    (bin_dir / "python").write_text('#!/bin/sh\necho "$@" >> %s\n' % calls)
    (bin_dir / "python").chmod(0o755)
    names = ["english", "multilingual", "typed-decisions", "cua-s1-4b-0.2", "open-jev-9b", "open-jev-27b-v1.1"]
    env = {
        **{k: v for k, v in os.environ.items() if k != "OMNI_REVISION"},
        "PATH": "%s:%s" % (bin_dir, os.environ["PATH"]),
        "OMNI_MODEL_ROOT": str(tmp_path),
        "OMNI_MODELS": ",".join(names + ["clef-flash"]),
        **env_extra,
    }
    proc = subprocess.run(["sh", os.path.join(ROOT, "deploy", "export.sh")], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    pins = {}
    for line in calls.read_text().splitlines():
        args = line.split()
        pins[args[args.index("--name") + 1]] = args[args.index("--revision") + 1]
    return pins


def test_every_published_name_is_exported_at_the_revision_models_md_names(tmp_path):
    """No published model follows a branch: each is pinned, by default, to docs/models.md's revision."""
    with open(os.path.join(ROOT, "docs", "models.md"), encoding="utf-8") as f:
        rows = re.findall(r"^\| `([\w.-]+)` \| [\w-]+ \| .*? \| `([0-9a-f]{40})`", f.read(), re.M)
    documented = dict(rows)
    assert len(documented) == 7
    assert _script_pins(tmp_path) == documented
    # OMNI_REVISION moves the Laya names alone; the others are pinned with their adapters and bases.
    moved = _script_pins(tmp_path, OMNI_REVISION="0" * 40)
    assert {n for n in moved if moved[n] != documented[n]} == {"english", "multilingual", "typed-decisions"}


def _run_failing_half(tmp_path, status: int, **env_extra):
    """export.sh with a stand-in `python` that records each call and exits `status` from every
    float16 call (3: the exporter's "failed its parity gate"): (the script's process, its
    exporter calls)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.txt"
    (bin_dir / "python").write_text(
        '#!/bin/sh\necho "$@" >> %s\ncase "$*" in *"--dtype float16"*) exit %d ;; esac\n' % (calls, status)
    )
    (bin_dir / "python").chmod(0o755)
    env = {**os.environ, "PATH": "%s:%s" % (bin_dir, os.environ["PATH"]), "OMNI_MODEL_ROOT": str(tmp_path), **env_extra}
    proc = subprocess.run(["sh", os.path.join(ROOT, "deploy", "export.sh")], env=env, capture_output=True, text=True)
    return proc, calls.read_text().splitlines()


def test_export_script_falls_back_to_float32_when_laya_fp16_fails(tmp_path):
    """OMNI_LAYA_EXPORT_DTYPE=float16 asks for the gated fp16 graph; when it fails its gate (a
    stand-in `python` exits 3 from every float16 call), the model is exported in float32 instead."""
    proc, (first, second) = _run_failing_half(tmp_path, 3, OMNI_MODELS="english", OMNI_LAYA_EXPORT_DTYPE="float16")
    assert proc.returncode == 0, proc.stderr
    assert first.endswith("--dtype float16") and second.endswith("--dtype float32")
    assert "exporting float32 instead" in proc.stderr


def test_export_script_falls_back_to_float32_when_a_qwen_fp16_export_fails(tmp_path):
    """The GPU stack's Qwen3.5 exports (float16, the fused CUDA kernel) fall back the same way:
    float32 with every other option kept, the fused kernel included (a float32 graph has no gate
    to run, so it exports without CUDA and is served on it)."""
    proc, calls = _run_failing_half(
        tmp_path, 3, OMNI_MODELS="cua-s1-4b-0.2", OMNI_EXPORT_DTYPE="float16", OMNI_GDN_KERNEL="gated_delta_net_fused"
    )
    assert proc.returncode == 0, proc.stderr
    first, second = calls
    assert first.endswith("--dtype float16") and second.endswith("--dtype float32")
    assert first[: -len("float16")] == second[: -len("float32")]
    assert "--gdn-kernel gated_delta_net_fused" in second and "--adapter cua-ai/cua-s1-4b-0.2/text" in second
    assert "the float16 export of cua-s1-4b-0.2 failed its parity gate" in proc.stderr


def test_export_script_fails_where_the_float32_fallback_does_not_fit(tmp_path):
    """The float32 fallback is taken only where it fits OMNI_EXPORT_MEMORY_LIMIT: the exporter's
    refusal (exit 4; a stand-in exits 4 from every float32 call) fails the script, saying why."""
    bin_dir, calls = _stand_in_python(
        tmp_path, 'case "$*" in *"--dtype float16"*) exit 3 ;; *"--dtype float32"*) exit 4 ;; esac\n'
    )
    env = {
        **os.environ,
        "PATH": "%s:%s" % (bin_dir, os.environ["PATH"]),
        "OMNI_MODEL_ROOT": str(tmp_path),
        "OMNI_MODELS": "open-jev-27b-v1.1,english",
        "OMNI_EXPORT_DTYPE": "float16",
        "OMNI_EXPORT_MEMORY_LIMIT": "64Gi",
    }
    proc = subprocess.run(["sh", os.path.join(ROOT, "deploy", "export.sh")], env=env, capture_output=True, text=True)
    assert proc.returncode == 4
    first, second = calls.read_text().splitlines()  # english is never reached
    assert "--memory-limit 64Gi" in first and "--memory-limit 64Gi" in second
    assert "open-jev-27b-v1.1 has no export its server can hold" in proc.stderr


@pytest.mark.parametrize("status", [1, 2])
def test_export_script_falls_back_only_for_the_gate(tmp_path, status):
    """Any other failure fails the script with its status, unretried: a checkpoint that cannot be
    had or refused options (2) would fail float32 the same way; a GPU out of memory or a full disk
    (1) is for the operator to see, not to be served as a float32 model twice the size."""
    proc, calls = _run_failing_half(tmp_path, status, OMNI_MODELS="open-jev-9b,english", OMNI_EXPORT_DTYPE="float16")
    assert proc.returncode == status
    assert len(calls) == 1 and "exporting float32 instead" not in proc.stderr


def test_the_image_serves_on_uvloop():
    """Granian's `auto` loop is rloop wherever rloop is installed (app/launch.py says why not):
    the runtime stage names uvloop, which the project installs, where an operator can override it."""
    runtime = [lines for name, _, lines in _stages(os.path.join(ROOT, "Dockerfile")) if name == "runtime"][0]
    assert "ENV GRANIAN_LOOP=uvloop" in runtime
    assert not any("--loop" in line for line in runtime if line.startswith("ENTRYPOINT"))  # the env can override
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        assert '"uvloop>=' in f.read()


def _named_variables() -> set[str]:
    """Every variable the Dockerfile and the compose files set or read: ARG and ENV names,
    compose `environment` keys and `${VAR}` interpolations."""
    import glob
    import re

    names: set[str] = set()
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        lines = f.read().replace("\\\n", " ").splitlines()
    for line in lines:
        if line.startswith("ARG "):
            names.add(line.split()[1].split("=")[0])
        elif line.startswith("ENV "):
            names.update(re.findall(r"([A-Z_][A-Z0-9_]*)=", line))
    files = glob.glob(os.path.join(ROOT, "compose*.yaml")) + [os.path.join(ROOT, "tests/deploy/compose.test.yaml")]
    for path in files:
        with open(path) as f:
            text = f.read()
        names.update(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", text))
        for service in (_compose(os.path.relpath(path, ROOT)).get("services") or {}).values():
            names.update(k for k in (service.get("environment") or {}) if k != "<<")
    return names


def test_every_variable_of_the_images_and_compose_is_documented():
    from app.config import _ENV_NAMES, OTHER_VARIABLES

    with open(os.path.join(ROOT, "docs", "configuration.md"), encoding="utf-8") as f:
        doc = f.read()
    named = _named_variables()
    assert {"OMNI_MODEL_ROOT", "OMNI_EXPORT_DTYPE", "OMNI_VERSION", "ORT_EXTRA", "BASE_IMAGE"} <= named
    missing = sorted(n for n in named | _ENV_NAMES | OTHER_VARIABLES if "`%s" % n not in doc)
    assert not missing, "not in docs/configuration.md: %s" % ", ".join(missing)
