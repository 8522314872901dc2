"""cuda_repo's apt index refresh (cuda_repo_probe.refresh_index): run where the repository changed or apt has no lists
of it, tried again when apt-get fails, never in check mode or on a tree, and a failure that stays says why."""

import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils import cuda_repo_probe
from ansible_collections.gpucluster.fabric.plugins.module_utils.applier import Applier


class Failed(Exception):
    pass


class Module:
    def __init__(self, rcs, check_mode=False, root="/"):
        self.params = {"root": root}
        self.check_mode = check_mode
        self._diff = False
        self.rcs = list(rcs)
        self.commands = []

    def get_bin_path(self, name, required=False):
        return f"/usr/bin/{name}"

    def run_command(self, command, environ_update=None):
        self.commands.append(command)
        rc = self.rcs.pop(0)
        return rc, "", "" if rc == 0 else "E: Failed to fetch http://mirror/x  Temporary failure resolving 'mirror'"

    def fail_json(self, msg, **result):
        raise Failed(msg)


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr(cuda_repo_probe.time, "sleep", lambda seconds: None)


def refresh(module, changed=False, lists=("x_Packages",)):
    applier = Applier(module, root=module.params["root"])
    if changed:
        applier.changes.append({"what": "/etc/apt/sources.list.d/cuda.list", "why": "its content differs"})
    cuda_repo_probe.refresh_index(module, applier, {"apt_lists": list(lists)})
    return applier.changes


def test_nothing_changed_and_lists_present_no_refresh():
    module = Module([])
    assert refresh(module) == [] and module.commands == []


def test_a_changed_source_refreshes_once():
    module = Module([0])
    changes = refresh(module, changed=True)
    assert changes[-1] == {"what": "apt index", "why": "the repository's keyring or source changed"}
    assert module.commands == [["/usr/bin/apt-get", "update", "-q", "-o", "DPkg::Lock::Timeout=300"]]


def test_no_lists_refreshes_and_a_failure_is_tried_again():
    module = Module([100, 0])
    assert refresh(module, lists=())[-1]["why"] == "apt has no lists of the repository yet"
    assert len(module.commands) == 2


def test_a_failure_that_stays_fails_with_apt_s_words():
    module = Module([100] * cuda_repo_probe.APT_UPDATE_TRIES)
    with pytest.raises(Failed, match=r"apt-get update failed \(rc 100\): E: Failed to fetch"):
        refresh(module, changed=True)
    assert len(module.commands) == cuda_repo_probe.APT_UPDATE_TRIES


def test_check_mode_says_so_and_runs_nothing():
    module = Module([], check_mode=True)
    assert refresh(module, changed=True)[-1]["what"] == "apt index" and module.commands == []


def test_a_tree_has_no_apt():
    module = Module([], root="/tmp/tree")
    changes = refresh(module, changed=True)
    assert changes == [{"what": "/etc/apt/sources.list.d/cuda.list", "why": "its content differs"}]
