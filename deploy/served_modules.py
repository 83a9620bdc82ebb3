"""The modules of models/ that serving imports: what the runtime image installs of models/.

    python3 deploy/served_modules.py SRC DST    # copy SRC/models' served modules to DST/models
    python3 deploy/served_modules.py SRC        # list them

Starting from the image's entrypoint (app.main) it follows each import of an `app` or
`models` module, those inside functions included, and each `models.*` module a served module
names in a string (models/registry.py imports its families by name), keeping each package's
__init__ on the way. The exporters, their graphs and gates, and the random checkpoints are left out, so the
image cannot import them; tests/runtime_site blocks the same modules for every test server,
and the import contracts in pyproject.toml keep serving from reaching for them. Stdlib only:
the Dockerfile runs it before anything is installed.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import sys

_NAMED = re.compile(r"^models(\.[A-Za-z_][A-Za-z0-9_]*)+$")


def _path(root: str, module: str) -> str | None:
    """The file of `module` under `root`, or None when there is none (an attribute, not a module)."""
    base = os.path.join(root, *module.split("."))
    for candidate in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None


def _imports(root: str, module: str, path: str) -> set[str]:
    """The `app` and `models` modules `module` imports (anywhere in it), and the `models`
    modules its strings name."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update("%s.%s" % (base, a.name) for a in node.names)  # a submodule, where it is one
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _NAMED.match(node.value):
            found.add(node.value)
    return {m for m in found if m.partition(".")[0] in ("app", "models") and _path(root, m)}


ENTRYPOINT = "app.main"  # the Dockerfile's `granian ... app.main:app`


def served_modules(root: str) -> set[str]:
    """Every `models` module (packages included) that serving from `root` can import."""
    todo = [ENTRYPOINT]
    seen: set[str] = set()
    found: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = _path(root, module)
        if path is None:
            continue
        if module.partition(".")[0] == "models":
            parts = module.split(".")
            found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))  # its packages too
        todo.extend(_imports(root, module, path))
    return {m for m in found if _path(root, m)}


def _files(root: str, package: str) -> list[str]:
    """Every module file of `package` under `root`, relative to `root`."""
    out = []
    for here, _, names in os.walk(os.path.join(root, package)):
        out += [os.path.relpath(os.path.join(here, n), root) for n in names if n.endswith(".py")]
    return sorted(out)


def all_modules(root: str) -> set[str]:
    """Every module of models/ under `root` (packages included)."""
    names = set()
    for rel in _files(root, "models"):
        name = rel[:-3].replace(os.sep, ".")
        names.add(name[: -len(".__init__")] if name.endswith(".__init__") else name)
    return names


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (1, 2):
        print(__doc__.strip().splitlines()[2:4], file=sys.stderr)
        return 2
    src = argv[0]
    modules = sorted(served_modules(src))
    if len(argv) == 1:
        print("\n".join(modules))
        return 0
    for module in modules:
        path = _path(src, module)
        dst = os.path.join(argv[1], os.path.relpath(path, src))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(path, dst)
    print("%d of %d modules of models/ copied to %s" % (len(modules), len(all_modules(src)), argv[1]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
