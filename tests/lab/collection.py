"""Make this checkout importable as ansible_collections.gpucluster.fabric for the lab's and the benchmarks' scripts.

The collection's module_utils import each other by their collection path
(ansible_collections.gpucluster.fabric.plugins.module_utils.*), so a script that uses them needs a collections root
on sys.path, not plugins/module_utils itself. tests/unit/conftest.py does the same for the unit tests (which also run
from the installed tarball, where tests/lab is not shipped).
"""

import contextlib
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def collections_root():
    """A directory holding ansible_collections/gpucluster/fabric for this checkout (made under .build when missing)."""
    parent = os.path.dirname(REPO)
    if os.path.basename(parent) == "gpucluster" and os.path.basename(os.path.dirname(parent)) == "ansible_collections":
        return os.path.dirname(os.path.dirname(parent))
    root = os.path.join(REPO, ".build", "collections")
    link = os.path.join(root, "ansible_collections", "gpucluster", "fabric")
    if not os.path.exists(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        with contextlib.suppress(FileExistsError):  # another lab script made it at the same moment
            os.symlink(REPO, link)
    return root


def importable():
    """Put the collections root on sys.path; returns it (for ANSIBLE_COLLECTIONS_PATH)."""
    root = collections_root()
    if root not in sys.path:
        sys.path.insert(0, root)
    return root
