"""Module node_check_hold run as Ansible runs it, its file in a temporary directory, read back by the node check's
own reader (module_utils/converge_hold.py, which the node check imports on the node)."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _process  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils import converge_hold  # noqa: E402


def run_module(tmp_path, check=False, **args):
    return _process.run_module("node_check_hold", tmp_path, check, False, **args)


def test_a_hold_written_root_only_read_by_the_check_then_ended(tmp_path):
    path = tmp_path / "hold"
    assert run_module(tmp_path, check=True, path=str(path), seconds=60)["changed"] is False
    assert not path.exists()  # check mode writes nothing
    before = time.time()
    written = run_module(tmp_path, path=str(path), seconds="60", by="site.yml")
    assert written["changed"] is False and before + 59 <= written["until"] <= time.time() + 61
    assert (os.stat(path).st_mode & 0o777) == 0o600
    assert json.loads(path.read_text()) == {"until": written["until"], "by": "site.yml"}
    assert converge_hold.read_hold(str(path), time.time()) == (written["until"], "site.yml")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".gpucluster-hold-")] == []  # no temporary left
    assert run_module(tmp_path, check=True, path=str(path), state="absent")["changed"] is False and path.exists()
    assert run_module(tmp_path, path=str(path), state="absent")["changed"] is False and not path.exists()
    assert run_module(tmp_path, path=str(path), state="absent").get("failed") is not True  # none to end: fine


def test_a_negative_hold_is_refused_with_the_fix(tmp_path):
    path = tmp_path / "hold"
    refused = run_module(tmp_path, path=str(path), seconds=-5)
    assert refused["failed"] is True and "seconds: -5 is negative" in refused["msg"] and not path.exists()
