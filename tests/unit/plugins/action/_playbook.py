"""Run ansible-playbook on localhost for the action plugin tests, with this checkout as the collection."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
COLLECTIONS = next(p for p in sys.path if (Path(p) / "ansible_collections" / "gpucluster" / "fabric").is_dir())

needs_playbook = pytest.mark.skipif(not PLAYBOOK.is_file(), reason="no ansible-playbook next to this Python")


def ansible_playbook(tmp_path, inventory, playbook, *args, roles_path=None, timeout=150):
    """ansible-playbook in tmp_path with its own Ansible home and temp directory, colour off.

    inventory is a path or an inline host list ("localhost,"); args go before the playbook.
    """
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
    argv = [str(PLAYBOOK), "-i", str(inventory), *args, str(playbook)]
    return run_once_more_on_hang(argv, env, tmp_path, timeout=timeout)


def run_once_more_on_hang(argv, env, cwd, timeout=150):
    """ansible-playbook, run a second time if the first hangs.

    Early ansible-core 2.19 releases (the oldest this collection supports, which `make matrix` tests) can lose their
    results thread to an exception in _convert_wire_task_result_to_raw and then wait for ever
    (https://github.com/ansible/ansible/issues/85879; seen once here under load). A hang is retried once, with the
    first run's output kept in the second's stderr; a second hang fails the test.
    """
    try:
        return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
        proc.stderr = f"(a first run hung for {timeout} s and was killed)\n{proc.stderr}"
        return proc
