"""Run ansible-playbook on localhost for the action plugin tests, with this checkout as the collection."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
COLLECTIONS = next(p for p in sys.path if (Path(p) / "ansible_collections" / "gpucluster" / "fabric").is_dir())

needs_playbook = pytest.mark.skipif(not PLAYBOOK.is_file(), reason="no ansible-playbook next to this Python")


def ansible_playbook(tmp_path, inventory, playbook, *args, roles_path=None, timeout=150, env_extra=None):
    """ansible-playbook in tmp_path with its own Ansible home and temp directory, colour off.

    inventory is a path or an inline host list ("localhost,"); args go before the playbook; env_extra adds to the
    environment.
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
    env.update(env_extra or {})
    argv = [str(PLAYBOOK), "-i", str(inventory), *args, str(playbook)]
    return run_once_more_on_hang(argv, env, tmp_path, timeout=timeout)


def run_once_more_on_hang(argv, env, cwd, timeout=150, attempts=3):
    """ansible-playbook, run again if it hangs (up to ``attempts`` runs in all).

    Early ansible-core 2.19 releases (the oldest this collection supports, which `make matrix` tests) can lose their
    results thread to a KeyError in _convert_wire_task_result_to_raw and then wait for ever
    (https://github.com/ansible/ansible/issues/85879, https://github.com/ansible/ansible/issues/86027; seen here under
    load, twice in a row once). A hang is retried, with the earlier runs' fate kept in the last one's stderr; a hang
    of every attempt fails the test.
    """
    hung = []
    for _attempt in range(attempts):
        try:
            proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            hung.append(f"(run {len(hung) + 1} hung for {timeout} s and was killed)")
            continue
        proc.stderr = "".join(f"{line}\n" for line in hung) + proc.stderr
        return proc
    raise AssertionError(f"ansible-playbook hung {attempts} times in a row: {' '.join(argv)}")
