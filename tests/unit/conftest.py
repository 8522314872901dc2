"""Make the collection importable as ansible_collections.gpucluster.fabric from a plain checkout."""

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def _collection_path():
    if ROOT.parent.name == "gpucluster" and ROOT.parent.parent.name == "ansible_collections":
        return str(ROOT.parent.parent.parent)
    base = Path(tempfile.mkdtemp(prefix="gpucluster-fabric-unit-"))
    (base / "ansible_collections" / "gpucluster").mkdir(parents=True)
    os.symlink(ROOT, base / "ansible_collections" / "gpucluster" / "fabric")
    return str(base)


sys.path.insert(0, _collection_path())


@pytest.fixture
def fixture_text():
    def read(relative):
        return (FIXTURES / relative).read_text()

    return read
