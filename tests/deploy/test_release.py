"""deploy/release.sh (`make release`): a release's images are tagged <version>-<commit> and
labelled with both, and a checkout with changes is refused, since the tag would not name them.
The script runs here on a git repository of its own holding the script and pyproject.toml; the
build itself runs on a Docker engine (docs/deployment.md, "Releases")."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib

from tests.conftest import ROOT

SCRIPT = os.path.join(ROOT, "deploy", "release.sh")


def git(repo, *args: str) -> str:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(repo),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


def release_repo(tmp_path):
    (tmp_path / "deploy").mkdir()
    shutil.copy(SCRIPT, tmp_path / "deploy" / "release.sh")
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), tmp_path / "pyproject.toml")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "release")
    return tmp_path


def run(repo, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(repo / "deploy" / "release.sh"), *args],
        env={"PATH": os.environ["PATH"], "HOME": str(repo), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_tag_is_the_version_and_the_commit(tmp_path):
    repo = release_repo(tmp_path)
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        version = tomllib.load(f)["project"]["version"]
    commit = git(repo, "rev-parse", "--short=12", "HEAD").strip()
    proc = run(repo, "--print-tag")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "%s-%s" % (version, commit)
    # Another commit, another tag.
    (repo / "README.md").write_text("next\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "next")
    assert run(repo, "--print-tag").stdout.strip() == "%s-%s" % (
        version,
        git(repo, "rev-parse", "--short=12", "HEAD").strip(),
    )


def test_a_checkout_with_changes_is_refused_before_anything_is_built(tmp_path):
    repo = release_repo(tmp_path)
    for change in ("edited", "untracked"):
        if change == "edited":
            (repo / "pyproject.toml").write_text((repo / "pyproject.toml").read_text() + "\n")
        else:
            git(repo, "checkout", "-q", "pyproject.toml")
            (repo / "new.py").write_text("")
        proc = run(repo)
        assert proc.returncode == 1, (change, proc.stdout, proc.stderr)
        assert "changes that" in proc.stderr and "docker" not in proc.stderr, proc.stderr
        assert ("pyproject.toml" if change == "edited" else "new.py") in proc.stderr


def test_the_release_builds_every_image_with_version_and_revision_labels():
    """The script hands VERSION and REVISION to the build, and both images label them."""
    with open(SCRIPT) as f:
        script = f.read()
    assert re.search(r'build --build-arg "VERSION=\$version" --build-arg "REVISION=\$revision"', script)
    assert 'OMNI_VERSION="$tag"' in script  # compose.yaml's image tags
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        dockerfile = f.read()
    for stage in ("runtime", "export"):
        body = re.search(r"^FROM \S+ AS %s$(.*?)(?=^FROM |\Z)" % stage, dockerfile, re.M | re.S).group(1)
        assert re.search(r"^ARG VERSION=", body, re.M) and re.search(r"^ARG REVISION=", body, re.M), stage
        assert 'org.opencontainers.image.version="${VERSION}"' in body, stage
        assert 'org.opencontainers.image.revision="${REVISION}"' in body, stage
    for compose_file in ("compose.yaml", "compose.cpu.yaml"):
        with open(os.path.join(ROOT, compose_file)) as f:
            tags = re.findall(r"image: (system1-omni(?:-export)?):\$\{OMNI_VERSION:-[^}]*\}(\S*)", f.read())
        assert {name for name, _ in tags} == {"system1-omni", "system1-omni-export"}, compose_file
    with open(os.path.join(ROOT, "Makefile")) as f:
        assert re.search(r"^release:\n\t.*deploy/release\.sh$", f.read(), re.M)
