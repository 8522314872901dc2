"""Make this checkout importable as ansible_collections.gpucluster.fabric for the unit tests."""

import os
import sys
import tempfile
from pathlib import Path

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = Path(REPO) / "tests" / "fixtures"


def _collections_root():
    parent = os.path.dirname(REPO)
    if os.path.basename(parent) == "gpucluster" and os.path.basename(os.path.dirname(parent)) == "ansible_collections":
        # Installed (ansible-test units): already importable from here.
        return os.path.dirname(os.path.dirname(parent))
    built = os.path.join(REPO, ".build", "collections")
    if os.path.isdir(os.path.join(built, "ansible_collections", "gpucluster", "fabric")):
        return built
    built = tempfile.mkdtemp(prefix="gpucluster-collections-")
    os.makedirs(os.path.join(built, "ansible_collections", "gpucluster"))
    os.symlink(REPO, os.path.join(built, "ansible_collections", "gpucluster", "fabric"))
    return built


sys.path.insert(0, _collections_root())


@pytest.fixture
def fixture_text():
    """Read a captured fixture (tests/fixtures/<relative>)."""

    def read(relative):
        return (FIXTURES / relative).read_text()

    return read
