"""Run ansible-playbook on localhost for the action plugin tests, with this checkout as the collection."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
COLLECTIONS = next(p for p in sys.path if (Path(p) / "ansible_collections" / "gpucluster" / "fabric").is_dir())

needs_playbook = pytest.mark.skipif(not PLAYBOOK.is_file(), reason="no ansible-playbook next to this Python")


def ansible_playbook(tmp_path, inventory, playbook, *args, roles_path=None):
    """ansible-playbook in tmp_path with its own Ansible home and temp directory, colour off."""
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
        ANSIBLE_HOME=str(tmp_path / "home"),
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_NOCOLOR="1",
    )
    if roles_path:
        env["ANSIBLE_ROLES_PATH"] = str(roles_path)
    return subprocess.run(
        [str(PLAYBOOK), "-i", str(inventory), str(playbook), *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
