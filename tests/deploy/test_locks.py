"""The lock files in requirements/: fresh against pyproject.toml, consistent with one another, and
what the Makefile and the Dockerfile install from (with their hashes)."""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import subprocess
import tomllib

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.conftest import ROOT

REQ = os.path.join(ROOT, "requirements")
EXTRAS = ("cpu", "gpu", "export", "test")
TORCH_BUILDS = ("torch-cpu", "torch-cuda")
# Only the CUDA stacks bring these: the default install (CI's) must not download them.
CUDA_WHEELS = re.compile(r"^(nvidia-|triton$|cuda-)")


def _lock_module():
    spec = importlib.util.spec_from_file_location("omni_lock", os.path.join(REQ, "lock.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _project():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _entries(name):
    """[(canonical name, version, marker or None, hashes)] of requirements/<name>.txt."""
    with open(os.path.join(REQ, name + ".txt")) as f:
        text = f.read()
    out = []
    for block in re.split(r"\n(?=[A-Za-z])", text):
        head = block.split("\\")[0].strip()
        if not head or head.startswith("#"):
            continue
        spec, _, marker = head.partition(";")
        pkg, version = spec.strip().split("==")
        out.append(
            (
                canonicalize_name(pkg),
                version,
                marker.strip() or None,
                frozenset(re.findall(r"--hash=sha256:([0-9a-f]{64})", block)),
            )
        )
    return out


def _pins(name, env=None):
    """{name: version} of a lock where its markers hold (for Python 3.11 on x86_64 Linux)."""
    env = env or {
        "python_full_version": "3.11.7",
        "python_version": "3.11",
        "sys_platform": "linux",
        "platform_machine": "x86_64",
        "platform_system": "Linux",
    }
    return {
        pkg: version for pkg, version, marker, _ in _entries(name) if marker is None or Marker(marker).evaluate(env)
    }


def test_every_lock_is_fresh_against_pyproject():
    """Each lock names the digest of the dependency tables it was resolved from: editing them
    without `make lock` fails here."""
    digest = _lock_module().inputs_digest()
    files = sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(REQ, "*.txt")))
    assert set(EXTRAS + TORCH_BUILDS) | {"pip", "uv", "test-nodeps"} == set(files)
    for name in files:
        with open(os.path.join(REQ, name + ".txt")) as f:
            assert "# inputs-sha256: %s\n" % digest in f.read(), "requirements/%s.txt is stale: make lock" % name


@pytest.mark.parametrize("extra", EXTRAS)
def test_each_extra_lock_satisfies_pyproject(extra):
    """Every dependency of the project and of the extra is pinned in its lock at a version the
    pyproject admits; torch, for export and test, in each torch-*.txt."""
    project = _project()
    pins = _pins(extra)
    for line in project["dependencies"] + project["optional-dependencies"][extra]:
        req = Requirement(line)
        if req.marker and not req.marker.evaluate({"sys_platform": "linux"}):
            continue
        if req.name == "torch":
            for build in TORCH_BUILDS:
                assert req.specifier.contains(Version(_pins(build)["torch"])), (build, line)
            assert "torch" not in pins
            continue
        name = canonicalize_name(req.name)
        assert name in pins, "%s is not in requirements/%s.txt" % (req.name, extra)
        assert req.specifier.contains(Version(pins[name]), prereleases=True), (line, pins[name])
        if req.name == "onnxruntime-gpu":  # [cuda,cudnn]: the CUDA wheels it loads are locked too
            assert {"nvidia-cudnn-cu13", "nvidia-cublas"} <= set(pins), sorted(pins)


def test_locks_agree_and_every_pin_has_hashes():
    """All the files come from one resolution: a package two files name has the same version and
    hashes under the same marker, so any set of them installs together."""
    seen = {}
    for name in EXTRAS + TORCH_BUILDS + ("pip", "uv", "test-nodeps"):
        entries = _entries(name)
        assert entries, name
        for pkg, version, marker, hashes in entries:
            assert hashes, "%s has no hash in requirements/%s.txt" % (pkg, name)
            key = (pkg, marker) if pkg != "torch" else (pkg, version)
            assert seen.setdefault(key, (version, hashes)) == (version, hashes), (name, pkg, marker)


def test_the_cpu_install_brings_no_cuda_wheels():
    """What `make install` installs by default (and CI with it) holds the CPU build of torch
    and no NVIDIA wheel; the CUDA build of torch is torch-cuda.txt's alone."""
    for name in ("cpu", "export", "test", "torch-cpu", "test-nodeps"):
        pins = _pins(name)
        assert not [p for p in pins if CUDA_WHEELS.match(p)], name
        assert "torch" not in pins or name == "torch-cpu"
    assert _pins("torch-cpu")["torch"].endswith("+cpu")
    assert "+" not in _pins("torch-cuda")["torch"]
    assert any(CUDA_WHEELS.match(p) for p in _pins("torch-cuda"))
    assert any(CUDA_WHEELS.match(p) for p in _pins("gpu"))  # onnxruntime-gpu[cuda,cudnn]


def _make_dry_run(tmp_path, *args):
    """`make -n` with a venv that does not exist: the commands a fresh install would run."""
    proc = subprocess.run(
        ["make", "-n", "--no-print-directory", "VENV=%s" % (tmp_path / "venv")] + list(args),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize(
    "args, locks",
    [
        ((), ["cpu", "export", "test", "torch-cpu"]),
        (("EXTRAS=gpu,export",), ["gpu", "export", "torch-cuda"]),
        (("EXTRAS=cpu",), ["cpu"]),
        (("EXTRAS=cpu,export", "TORCH=cuda"), ["cpu", "export", "torch-cuda"]),
    ],
)
def test_make_install_installs_the_locks(tmp_path, args, locks):
    """`make install` installs the extras' locks with their hashes, then the project alone: no
    pip install of a package by name, and a stamp of its own for each set of extras."""
    out = _make_dry_run(tmp_path, "install", *args)
    sync = [line.split() for line in out.splitlines() if "requirements/sync.py" in line]
    assert len(sync) == 1
    words = sync[0][sync[0].index("requirements/sync.py") + 1 :]
    options = dict(zip(words[: -len(locks)][::2], words[: -len(locks)][1::2]))
    assert words[-len(locks) :] == ["requirements/%s.txt" % n for n in locks], words
    # The other runtime goes (onnxruntime and onnxruntime-gpu share one package directory).
    assert options["--drop"] == "requirements/%s.txt" % ("cpu" if "gpu" in locks else "gpu")
    assert ("--nodeps" in options) == ("test" in locks)
    assert set(options) <= {"--drop", "--nodeps"} and len(words) == len(locks) + 2 * len(options), words
    for line in out.splitlines():
        if " -m pip install" in line:
            assert "--require-hashes -r requirements/" in line or "--no-deps -e ." in line, line
    stamps = re.findall(r"touch '([^']+)'", out)
    assert len(stamps) == 1 and os.path.dirname(stamps[0]) == str(tmp_path / "venv")
    extras = dict(a.split("=") for a in args).get("EXTRAS", "cpu,export,test")
    assert extras.replace(",", "+") in os.path.basename(stamps[0])


def test_make_serve_installs_what_serving_needs(tmp_path):
    """`make serve` installs the runtime and the export extra (the demo), not the test extra;
    `make test` the test extra too."""
    serve = [line for line in _make_dry_run(tmp_path, "serve").splitlines() if "requirements/sync.py" in line]
    assert serve and "requirements/export.txt" in serve[0] and "requirements/test.txt" not in serve[0]
    test = [line for line in _make_dry_run(tmp_path, "test").splitlines() if "requirements/sync.py" in line]
    assert test and "requirements/test.txt" in test[0] and "requirements/test-nodeps.txt" in test[0]


def test_a_default_install_then_other_extras_installs_again(tmp_path):
    """The stamp names the extras: after the default install is stamped, EXTRAS=gpu,export is
    not up to date."""
    venv = tmp_path / "venv"
    venv.mkdir()
    default = re.findall(r"touch '([^']+)'", _make_dry_run(tmp_path, "install"))[0]
    open(default, "w").close()
    assert "requirements/sync.py" not in _make_dry_run(tmp_path, "install")
    assert "requirements/gpu.txt" in _make_dry_run(tmp_path, "install", "EXTRAS=gpu,export")


def test_the_dockerfile_installs_from_the_locks():
    """Every pip install in the Dockerfile reads a lock with --require-hashes and names no package;
    no hadolint rule is switched off; the build context holds the locks."""
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        text = f.read()
    assert "hadolint ignore" not in text
    runs = [line for line in text.replace("\\\n", " ").splitlines() if line.startswith("RUN")]
    installs = [cmd for line in runs for cmd in re.split(r"&&|;", line) if "pip install" in cmd]
    assert len(installs) == 3, installs
    for cmd in installs:
        words = cmd.split()
        assert "--require-hashes" in words, cmd
        after = words[words.index("install") + 1 :]
        args = [
            w
            for i, w in enumerate(after)
            if not w.startswith("-") and after[i - 1] not in ("-r", "--find-links", "--extra-index-url")
        ]
        assert args == ['"$@"'], cmd  # only the optional index flags
    locks = set(re.findall(r"requirements/([\w${}-]+)\.txt", " ".join(runs)))
    assert locks == {"pip", "${ORT_EXTRA}", "export", "torch-${TORCH}"}, locks
    with open(os.path.join(ROOT, ".dockerignore")) as f:
        assert "!requirements/*.txt" in f.read().splitlines()


def _block(lock, name):
    """The lines of one pin in requirements/<lock>.txt (its hashes included)."""
    with open(os.path.join(REQ, lock + ".txt")) as f:
        blocks = re.split(r"\n(?=[A-Za-z])", f.read())
    return next(b for b in blocks if b.startswith(name + "==")).split("    #")[0].rstrip() + "\n"


@pytest.mark.slow  # a venv and packages from the index
def test_sync_removes_the_other_runtime_and_other_versions_then_installs_the_locks(tmp_path):
    """requirements/sync.py in a real venv: a package the --drop lock names and the install does
    not goes, one installed at another version than locked is replaced, and the lock's own pins
    are installed with their hashes; other packages stay."""
    venv = tmp_path / "venv"
    subprocess.run(["python3", "-m", "venv", str(venv)], check=True, timeout=120)
    py = str(venv / "bin" / "python")
    pip = [py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run(pip + ["sniffio==1.3.0", "mdurl==0.1.2", "iniconfig==2.3.1"], check=True, timeout=300)
    (tmp_path / "want.txt").write_text(_block("cpu", "sniffio"))
    (tmp_path / "drop.txt").write_text(_block("cpu", "mdurl"))
    proc = subprocess.run(
        [py, os.path.join(REQ, "sync.py"), "--drop", str(tmp_path / "drop.txt"), str(tmp_path / "want.txt")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "sync: removing mdurl sniffio" in proc.stderr
    listed = subprocess.run(
        [py, "-m", "pip", "list", "--format", "freeze", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "sniffio==1.3.1" in listed and "iniconfig==2.3.1" in listed
    assert not [p for p in listed if p.startswith("mdurl==")]
    # A lock without hashes is refused, as --require-hashes does.
    (tmp_path / "bare.txt").write_text("mdurl==0.1.2\n")
    bare = subprocess.run(
        [py, os.path.join(REQ, "sync.py"), str(tmp_path / "bare.txt")], capture_output=True, text=True, timeout=300
    )
    assert bare.returncode != 0 and "hash" in bare.stderr.lower()
