"""Run first by every test server's Python (tests/server.py puts this folder on its PYTHONPATH):
the modules named in NOT_IN_RUNTIME_IMAGE, those the runtime image does not install (torch,
transformers, onnx, the test packages), cannot be imported. A serving path that reaches for one
then fails in the tests as it would in the image, and an optional import falls back as it would
there.
"""
import importlib.abc
import os
import sys


class _NotInRuntime(importlib.abc.MetaPathFinder):
    def __init__(self, names):
        self.names = frozenset(names)

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError("No module named %r: the runtime image does not install it "
                                      "(requirements/cpu.txt)" % name, name=name)
        return None


_names = [n for n in os.environ.get("NOT_IN_RUNTIME_IMAGE", "").split(",") if n]
if _names:
    sys.meta_path.insert(0, _NotInRuntime(_names))
