"""Load a module_utils file by path, so the tests need no installed collection."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]


def load(name):
    path = ROOT / "plugins" / "module_utils" / (name + ".py")
    spec = importlib.util.spec_from_file_location("gpucluster_fabric_module_utils_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
