"""Release metadata a user can trust: what a release shipped and later removed has a tombstone that says what to use.

The dry-run release (what the next release's notes would list) is `tools/release_notes.py --check`, in `make lint`.
"""

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import release_notes  # noqa: E402


def _released_filters():
    """Every filter the last release shipped: antsibull-changelog's record of it (changelogs/.plugin-cache.yaml, which
    `antsibull-changelog release` writes), and any a release's notes listed."""
    cache = yaml.safe_load((ROOT / "changelogs/.plugin-cache.yaml").read_text())
    names = set(cache["plugins"]["filter"])
    for release in yaml.safe_load((ROOT / "changelogs/changelog.yaml").read_text())["releases"].values():
        names |= {plugin["name"] for plugin in release.get("plugins", {}).get("filter", [])}
    return names


def _tombstones():
    routing = yaml.safe_load((ROOT / "meta/runtime.yml").read_text()).get("plugin_routing", {})
    return {name: entry["tombstone"] for name, entry in routing.get("filter", {}).items() if "tombstone" in entry}


def test_every_released_filter_is_still_there_or_has_a_tombstone():
    released = _released_filters()
    assert len(released) >= 20
    current, tombstones = release_notes.filters(), _tombstones()
    assert sorted(set(released) - current - set(tombstones)) == []
    # and a tombstone only for what a release shipped and is gone
    assert sorted(set(tombstones) - (set(released) - current)) == []
    for name, tombstone in tombstones.items():
        assert tombstone["warning_text"].strip() and tombstone["removal_version"], name


def test_a_playbook_naming_a_removed_filter_fails_with_the_tombstone_message(tmp_path):
    (tmp_path / "ansible_collections" / "gpucluster").mkdir(parents=True)
    (tmp_path / "ansible_collections" / "gpucluster" / "fabric").symlink_to(ROOT)
    playbook = tmp_path / "removed.yml"
    playbook.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.debug:\n        msg: \"{{ '0x10' | gpucluster.fabric.nccl_version_code }}\"\n"
    )
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(tmp_path), ANSIBLE_HOME=str(tmp_path / "home"), NO_COLOR="1")
    result = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0, output
    assert "gpucluster.fabric.nccl_version_code" in output and "has been removed" in output
    assert "Role nccl and its module gpucluster.fabric.nccl check the version" in output


def test_the_node_check_names_the_release_galaxy_yml_makes():
    """--version and gpucluster_fabric_check_info on the node say galaxy.yml's version (the node has no galaxy.yml)."""
    source = (ROOT / "plugins/module_utils/node_check.py").read_text()
    version = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
    assert f'\nCOLLECTION_VERSION = "{version}"\n' in source, (
        "raise COLLECTION_VERSION in node_check.py with galaxy.yml"
    )
