"""Make a virtual environment hold what lock files name, as `make install` does.

    python requirements/sync.py [--nodeps FILE]... [--drop FILE]... FILE...

First uninstalls what the files pin at another version (torch's CPU and CUDA builds differ only in
their local version, which pip's `==` ignores) and what a --drop file names that they do not (the
other runtime: onnxruntime and onnxruntime-gpu share one package directory); then installs the
files with --require-hashes. Other packages stay: a venv gains extras and keeps them. Only the
standard library and the environment's own pip: it runs before anything else is installed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import subprocess
import sys

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked(paths: list[str]) -> dict[str, set[str]]:
    """{name: versions pinned} over the files: a universal lock pins some names once per Python."""
    pins: dict[str, set[str]] = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                m = PIN.match(line)
                if m:
                    pins.setdefault(canonical(m.group(1)), set()).add(m.group(2))
    return pins


def installed() -> dict[str, str]:
    return {canonical(d.metadata["Name"]): d.version for d in importlib.metadata.distributions() if d.metadata["Name"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("locks", nargs="+")
    parser.add_argument("--nodeps", action="append", default=[], help="a lock installed with --no-deps")
    parser.add_argument("--drop", action="append", default=[], help="a lock whose other packages go")
    args = parser.parse_args(argv)
    pins = locked(args.locks + args.nodeps)
    dropped = set(locked(args.drop)) - set(pins)
    stale = sorted(
        name for name, version in installed().items() if name in dropped or (name in pins and version not in pins[name])
    )
    pip = [sys.executable, "-m", "pip"]
    if stale:
        print("sync: removing %s" % " ".join(stale), file=sys.stderr)
        subprocess.run(pip + ["uninstall", "--quiet", "--yes"] + stale, check=True)
    subprocess.run(
        pip + ["install", "--quiet", "--require-hashes"] + sum((["-r", p] for p in args.locks), []), check=True
    )
    if args.nodeps:
        subprocess.run(
            pip + ["install", "--quiet", "--require-hashes", "--no-deps"] + sum((["-r", p] for p in args.nodeps), []),
            check=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
