"""Run first by every test server's Python (tests/server.py puts this folder on its PYTHONPATH):
the modules named in NOT_IN_RUNTIME_IMAGE, those the runtime image does not install (torch,
transformers, onnx, the test packages), cannot be imported, nor the modules of models/ named in
NOT_IN_RUNTIME_MODULES, those the image leaves out (the exporters). A serving path that reaches for one
then fails in the tests as it would in the image, and an optional import falls back as it would
there.
"""

import importlib.abc
import os
import sys


class _NotInRuntime(importlib.abc.MetaPathFinder):
    def __init__(self, names, modules):
        self.names, self.modules = frozenset(names), frozenset(modules)

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(
                "No module named %r: the runtime image does not install it (requirements/cpu.txt)" % name, name=name
            )
        if name in self.modules:
            raise ModuleNotFoundError(
                "No module named %r: the runtime image leaves it out of models/ (deploy/served_modules.py)" % name,
                name=name,
            )
        return None


def _listed(variable):
    return [n for n in os.environ.get(variable, "").split(",") if n]


_names, _modules = _listed("NOT_IN_RUNTIME_IMAGE"), _listed("NOT_IN_RUNTIME_MODULES")
if _names or _modules:
    sys.meta_path.insert(0, _NotInRuntime(_names, _modules))
