import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _load import load  # noqa: E402

preflight = load("preflight", kind="plugin_utils")

SPECS = {
    "results": [
        {"item": "rdma_core", "failed": False},
        {
            "item": "nccl",
            "failed": True,
            "argument_errors": ["missing required arguments: nccl_version", "nccl_hold is of type str"],
        },
        {"item": "opensm", "failed": True, "msg": "Validation of arguments failed"},
        # failed_when: false leaves `failed` false; the errors are still there
        {"item": "cuda_repo", "failed": False, "argument_errors": ["cuda_repo_distro is of type int"]},
    ]
}


def test_every_kind_of_problem_in_one_report():
    declared = {"failed": False, "msg": "x", "messages": ["gpu1: nccl_versoin: did you mean nccl_version?"]}
    checks = [
        {"role": "rdma_core", "msg": "gpu1: rdma_core_memlock=lots is not a limit"},
        {"role": "fabric_validate", "msg": "tiers must be a list"},
    ]
    messages = preflight.report("gpu1", declared, SPECS, checks)
    assert messages == [
        "gpu1: nccl_versoin: did you mean nccl_version?",
        "gpu1: gpucluster.fabric.nccl: missing required arguments: nccl_version (set it, or leave nccl out of "
        "gpucluster_roles to not manage NCCL here)",
        "gpu1: gpucluster.fabric.nccl: nccl_hold is of type str",
        "gpu1: gpucluster.fabric.opensm: Validation of arguments failed",
        "gpu1: gpucluster.fabric.cuda_repo: cuda_repo_distro is of type int",
        "gpu1: rdma_core_memlock=lots is not a limit",
        "gpu1: gpucluster.fabric.fabric_validate: tiers must be a list",
    ]
    text = preflight.failure_message("gpu1", messages, ["rdma_core", "nccl"])
    assert text.startswith("gpu1: 7 problems in the inventory (checked for roles rdma_core, nccl); nothing was changed")
    assert text.count("\n- ") == 7


def test_declared_vars_modes():
    assert preflight.declared_messages({"skipped": True}) == []  # ignore
    assert preflight.declared_messages({"warnings": ["w"], "messages": ["w"]}) == []  # warn: shown as warnings
    bad_mode = {"msg": "gpu1: gpucluster_unknown_vars='loud': choose one of error, warn, ignore", "messages": []}
    assert preflight.declared_messages(bad_mode) == [bad_mode["msg"]]
    assert preflight.declared_messages({"messages": [], "undeclared": []}) == []
    assert preflight.declared_messages(None) == []


def test_clean_host_has_no_message():
    assert preflight.report("gpu1", {"messages": []}, {"results": [{"item": "nccl", "failed": False}]}, []) == []
    assert preflight.spec_messages("gpu1", None) == ([], [])


def test_a_looped_check_reports_each_failed_item():
    result = {
        "failed": True,
        "msg": "One or more items failed",
        "results": [
            {"failed": False, "msg": "All assertions passed"},
            {"failed": True, "msg": "gpu1: a! is not a valid package name"},
            {"failed": True, "msg": "gpu1: b! is not a valid package name"},
        ],
    }
    assert preflight.check_messages("gpu1", [{"role": "rdma_core", "result": result}]) == [
        "gpu1: a! is not a valid package name",
        "gpu1: b! is not a valid package name",
    ]
    assert preflight.check_messages("gpu1", [{"role": "nccl", "result": {"failed": True}}]) == [
        "gpu1: gpucluster.fabric.nccl: check failed"
    ]


def test_a_check_with_several_problems_gives_one_message_each():
    result = {"failed": True, "msg": "gpu1: a is wrong\ngpu1: b is wrong\n"}
    assert preflight.check_messages("gpu1", [{"role": "rdma_core", "result": result}]) == [
        "gpu1: a is wrong",
        "gpu1: b is wrong",
    ]
