"""Make ``ansible_collections.gpucluster.fabric`` importable from a plain checkout (as `make venv` links it)."""

import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _collections_root():
    built = os.path.join(ROOT, ".build", "collections")
    if os.path.isdir(os.path.join(built, "ansible_collections", "gpucluster", "fabric")):
        return built
    scratch = tempfile.mkdtemp(prefix="gpucluster-collections-")
    os.makedirs(os.path.join(scratch, "ansible_collections", "gpucluster"))
    os.symlink(ROOT, os.path.join(scratch, "ansible_collections", "gpucluster", "fabric"))
    return scratch


try:
    import ansible_collections.gpucluster.fabric  # noqa: F401
except ImportError:
    sys.path.insert(0, _collections_root())
