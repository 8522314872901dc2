"""Load a module_utils (or plugin_utils) file by path, so the tests need no installed collection."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]


def load(name, kind="module_utils"):
    path = ROOT / "plugins" / kind / (name + ".py")
    spec = importlib.util.spec_from_file_location(f"gpucluster_fabric_{kind}_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
