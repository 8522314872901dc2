"""Fixtures of the repository-level tests."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _collection_modules():
    return {name: module for name, module in sys.modules.items() if name.split(".")[0] == "ansible_collections"}


@pytest.fixture(scope="module")
def collection_loader(tmp_path_factory):
    """The collection's own filters (gpucluster.fabric.*) resolvable, as under ansible-playbook; removed after.

    tests/unit import the collection as a plain package (tests/unit/conftest.py); Ansible's plugin loader needs the
    packages its collection finder imports, so those are set aside meanwhile and restored after.
    """
    from ansible.utils.collection_loader import AnsibleCollectionConfig
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

    if AnsibleCollectionConfig.collection_finder is not None:
        yield
        return
    root = tmp_path_factory.mktemp("collections")
    (root / "ansible_collections" / "gpucluster").mkdir(parents=True)
    (root / "ansible_collections" / "gpucluster" / "fabric").symlink_to(ROOT)
    plain = _collection_modules()
    for name in plain:
        del sys.modules[name]
    _AnsibleCollectionFinder(paths=[str(root)])._install()
    yield
    _AnsibleCollectionFinder._remove()
    AnsibleCollectionConfig._collection_finder = None
    for name in _collection_modules():
        del sys.modules[name]
    sys.modules.update(plain)
