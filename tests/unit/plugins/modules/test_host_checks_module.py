"""Module host_checks run as Ansible runs it (a separate Python process with its arguments as JSON): each step returns
what its own module returns when run alone, a failed step does not stop the next, and nothing that would change the
host is run."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _process  # noqa: E402

RDMA_ARGS = {
    "host": "gpu1",
    "core_modules": ["ib_core", "ib_uverbs"],
    "interfaces": [{"name": "eth1", "kind": "roce", "softroce": "rxe0"}],
}


@pytest.fixture
def root(tmp_path):
    """A host tree: /proc without modules support, one Ethernet link in sysfs, nothing in /etc."""
    tree = tmp_path / "root"
    (tree / "proc").mkdir(parents=True)
    link = tree / "sys" / "class" / "net" / "eth1"
    link.mkdir(parents=True)
    (link / "type").write_text("1\n")
    (link / "mtu").write_text("4200\n")
    return tree


def steps(root):
    return [
        {
            "module": "gpucluster.fabric.rdma_modules",
            "args": dict(RDMA_ARGS, state="checked", root=str(root)),
        },
        {
            "module": "gpucluster.fabric.fabric_link_info",
            "args": {"names": ["eth1", "ib0"], "sysfs_root": str(root / "sys"), "root": str(root)},
        },
    ]


def test_each_step_returns_what_its_module_returns(tmp_path, root):
    combined = _process.run_module("host_checks", tmp_path, steps=steps(root))
    assert combined["changed"] is False and len(combined["results"]) == 2
    alone = [_process.run_module(step["module"].rsplit(".", 1)[1], tmp_path, **step["args"]) for step in steps(root)]
    for mine, theirs in zip(combined["results"], alone):
        theirs.pop("invocation", None)
        assert mine == theirs
    assert combined["results"][1]["links"]["eth1"]["mtu"] == 4200
    assert combined["results"][1]["links"]["ib0"] == {"name": "ib0", "exists": False}
    assert not (root / "etc").exists()


def test_a_failed_step_does_not_stop_the_next(tmp_path, root):
    bad = steps(root)
    bad[0]["args"]["core_modules"] = ["ib_core; reboot"]
    results = _process.run_module("host_checks", tmp_path, steps=bad)["results"]
    assert results[0]["failed"] is True
    assert results[0]["msg"].startswith("gpu1: ") and "is not a kernel module name" in results[0]["msg"]
    assert results[1]["links"]["eth1"]["exists"] is True


def test_steps_that_would_change_the_host_are_refused(tmp_path, root):
    present = steps(root)
    present[0]["args"]["state"] = "present"
    results = _process.run_module("host_checks", tmp_path, steps=present)["results"]
    assert results[0] == {
        "failed": True,
        "changed": False,
        "msg": "host_checks: gpucluster.fabric.rdma_modules would change the host with these arguments; it only checks",
    }
    assert not (root / "etc").exists()


def test_arguments_are_checked_against_the_modules_own_spec(tmp_path, root):
    wrong = steps(root)
    wrong[1]["args"]["nmaes"] = ["eth1"]
    results = _process.run_module("host_checks", tmp_path, steps=wrong)["results"]
    assert results[1]["failed"] is True and results[1]["msg"].startswith("gpucluster.fabric.fabric_link_info: ")
    assert "nmaes" in results[1]["msg"]


def test_inputs_take_an_earlier_result(tmp_path, root):
    """nccl's offered_index from the probe's offered_nccl, as the site preflight wires it; nccl refuses a build that
    the (given) index does not offer, so the message shows which index it read."""
    from ansible_collections.gpucluster.fabric.plugins.module_utils import host_checks

    seen = []

    def fake_probe(module):
        module.exit_json(offered_nccl={"libnccl2": ["2.21.5-1+cuda12.4"]})

    def fake_nccl(module):
        seen.append(module.params["offered_index"])
        module.fail_json(msg="stop here")

    class Module:
        no_log_values = set()
        check_mode = False

        def warn(self, text):
            raise AssertionError("steps' warnings stay in their own result")

    class Validator:
        def __init__(self, spec):
            pass

        def validate(self, args):
            return type("Result", (), {"error_messages": [], "validated_parameters": dict(args)})()

    saved = dict(host_checks.STEPS)
    host_checks.STEPS["gpucluster.fabric.cuda_repo_probe"] = ({}, fake_probe, lambda args: True)
    host_checks.STEPS["gpucluster.fabric.nccl"] = ({}, fake_nccl, lambda args: True)
    try:
        results = host_checks.run_steps(
            Module(),
            Validator,
            [
                {"module": "gpucluster.fabric.cuda_repo_probe", "args": {}},
                {
                    "module": "gpucluster.fabric.nccl",
                    "args": {"offered_index": {}},
                    "inputs": {"offered_index": ["gpucluster.fabric.cuda_repo_probe", "offered_nccl"]},
                },
                {
                    "module": "gpucluster.fabric.nccl",
                    "args": {"offered_index": {"kept": []}},
                    "inputs": {"offered_index": ["gpucluster.fabric.fabric_link_info", "offered_nccl"]},
                },
            ],
        )
    finally:
        host_checks.STEPS.clear()
        host_checks.STEPS.update(saved)
    assert seen == [{"libnccl2": ["2.21.5-1+cuda12.4"]}, {"kept": []}]
    assert results[1] == {"failed": True, "changed": False, "msg": "stop here"}
