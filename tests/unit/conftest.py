"""Make this checkout importable as ansible_collections.gpucluster.fabric for the unit tests."""

import os
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_built = os.path.join(REPO, ".build", "collections")
if not os.path.isdir(os.path.join(_built, "ansible_collections", "gpucluster", "fabric")):
    _built = tempfile.mkdtemp(prefix="gpucluster-collections-")
    os.makedirs(os.path.join(_built, "ansible_collections", "gpucluster"))
    os.symlink(REPO, os.path.join(_built, "ansible_collections", "gpucluster", "fabric"))
sys.path.insert(0, _built)
