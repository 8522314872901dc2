"""Import a module_utils (or plugin_utils) file of the collection by name (tests/unit/conftest.py puts a collections
root holding this checkout on sys.path, so the tests need no installed collection)."""

import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]


def load(name, kind="module_utils"):
    return importlib.import_module(f"ansible_collections.gpucluster.fabric.plugins.{kind}.{name}")
