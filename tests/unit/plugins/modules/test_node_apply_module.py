"""Module node_apply run as Ansible runs it (a separate Python process with its arguments as JSON), on a root tree: each
step returns what its own applier module returns when run alone, check mode changes nothing, the diffs of every step
come back together, and a step that fails stops the steps after it."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _process  # noqa: E402

LIMITS = "etc/security/limits.d/90-gpucluster-rdma-memlock.conf"
CORE_ARGS = {"host": "gpu1", "os_family": "Debian", "distribution": "Debian", "header": "# Ansible managed"}
MODULES_ARGS = {"host": "gpu1", "core_modules": ["ib_core"], "interfaces": [], "header": "# Ansible managed"}


def tree(tmp_path):
    root = tmp_path / "root"
    (root / "proc").mkdir(parents=True)
    return root


def steps(root, **modules_args):
    return [
        {"module": "gpucluster.fabric.rdma_core", "args": dict(CORE_ARGS, root=str(root))},
        {"module": "gpucluster.fabric.rdma_modules", "args": dict(MODULES_ARGS, root=str(root), **modules_args)},
    ]


def test_each_step_as_its_module_alone_check_mode_first(tmp_path):
    root = tree(tmp_path)
    predicted = _process.run_module("node_apply", tmp_path, check=True, diff=True, steps=steps(root))
    assert predicted["changed"] is True and not (root / "etc").exists()
    headers = [entry["after_header"] for entry in predicted["diff"]]
    assert "/" + LIMITS in headers and any("modules-load.d" in header for header in headers), headers

    combined = _process.run_module("node_apply", tmp_path, steps=steps(root))
    assert combined["changed"] is True and len(combined["results"]) == 2
    assert (root / LIMITS).is_file()
    again = _process.run_module("node_apply", tmp_path, steps=steps(root))
    alone = [_process.run_module(step["module"].rsplit(".", 1)[1], tmp_path, **step["args"]) for step in steps(root)]
    for mine, theirs in zip(again["results"], alone):
        theirs.pop("invocation", None)
        assert mine == theirs
    assert again["changed"] is False


def test_a_failed_step_stops_the_steps_after_it(tmp_path):
    root = tree(tmp_path)
    bad = list(reversed(steps(root, core_modules=["ib_core; reboot"])))
    result = _process.run_module("node_apply", tmp_path, steps=bad)
    assert result["failed"] is True and "is not a kernel module name" in result["msg"]
    assert result["results"][0]["failed"] is True
    assert result["results"][1] == {
        "changed": False,
        "skipped": True,
        "msg": "not run: gpucluster.fabric.rdma_modules failed before it",
    }
    assert not (root / "etc").exists()


def test_only_the_appliers(tmp_path):
    root = tree(tmp_path)
    result = _process.run_module(
        "node_apply", tmp_path, steps=[{"module": "gpucluster.fabric.fabric_link_info", "args": {"names": []}}]
    )
    assert result["failed"] is True and "gpucluster.fabric.fabric_link_info" in result["msg"]
    assert not (root / "etc").exists()
