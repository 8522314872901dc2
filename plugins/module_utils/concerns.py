# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The registry of concerns: every concern the collection manages, once, in site.yml's order, with the hosts it
applies to, the module its role's task calls, and how that task's arguments make the concern's part of the intent.

Whatever lists the concerns reads them here: the site preflight's roles (filter site_roles), module apply's roles
and the task each applies, the intent's parts (plugin_utils/role_checks.py), the appliers a node runs
(node_apply.APPLIERS, checked against this by tests/repo/test_concerns.py, which also fails on a list of concern
names anywhere else), and the documentation's choices. Standard library only (Python 3.8 targets).
"""

from collections import namedtuple

# role: the role (and the concern's name); hosts: "gpu" (the GPU nodes), "sm" (the subnet managers) or "every";
# module: the module its role's task calls (None: fabric_validate, which measures); task: that task's file in
# roles/<role>/tasks; leave_out: the task's arguments that steer the run only (tags, state, controller-side helpers),
# not the intent; drift: whether the node check runs the module in check mode (node_apply.APPLIERS) for its drift;
# in_apply: whether module apply runs it in the GPU nodes' plays; code: the module_utils module holding the module's
# code (its run, its ARGUMENT_SPEC, and nothing_to_apply(args) where some arguments leave nothing to do);
# without: what the preflight adds to a missing required value, where a site can do without the concern.
Concern = namedtuple(
    "Concern",
    ("role", "hosts", "module", "task", "leave_out", "drift", "in_apply", "code", "without"),
    defaults=(None,),
)
_HOST = ("state", "host")

CONCERNS = (
    Concern("rdma_core", "gpu", "gpucluster.fabric.rdma_core", "apply.yml", _HOST, True, True, "rdma_core"),
    Concern("rdma_modules", "gpu", "gpucluster.fabric.rdma_modules", "apply.yml", _HOST, True, True, "rdma_modules"),
    Concern("hca_firmware", "gpu", "gpucluster.fabric.hca_firmware", "apply.yml", _HOST, True, True, "hca_firmware"),
    Concern(
        "fabric_interfaces",
        "gpu",
        "gpucluster.fabric.fabric_interfaces",
        "main.yml",
        ("role_checks", "run_tags", "skip_tags", "host"),
        True,
        True,
        "fabric_interfaces_apply",
        "or leave fabric_interfaces out of gpucluster_roles",
    ),
    Concern("roce_qos", "gpu", "gpucluster.fabric.roce_qos", "main.yml", ("role_checks",), True, True, "roce_qos_node"),
    Concern(
        "cuda_repo",
        "gpu",
        "gpucluster.fabric.cuda_repo",
        "main.yml",
        ("run_tags", "skip_tags", "host", "keyring_deb_src"),
        True,
        True,
        "cuda_repo_probe",
        "or leave cuda_repo out of gpucluster_roles where the site has its own CUDA repository",
    ),
    Concern(
        "nccl",
        "gpu",
        "gpucluster.fabric.nccl",
        "apply.yml",
        ("state", "host", "offered_index", "before_repository", "library_in_place"),
        True,
        True,
        "nccl",
        "or leave nccl out of gpucluster_roles to not manage NCCL here",
    ),
    # OpenSM's keys stay in opensm.conf, which OpenSM reads: its task's conf is never templated for the intent.
    Concern(
        "opensm",
        "sm",
        "gpucluster.fabric.opensm",
        "configure.yml",
        ("conf", "state", "host"),
        True,
        False,
        "opensm_apply",
    ),
    Concern(
        "node_check",
        "every",
        "gpucluster.fabric.node_check",
        "main.yml",
        ("role_checks", "host"),
        False,
        False,
        "node_check_install",
    ),
    Concern("fabric_validate", "gpu", None, None, (), False, False, None),
)
HOSTS = ("gpu", "sm", "every")


def roles(hosts=None):
    """The concerns' roles in site.yml's order; ``hosts``: only those of that kind of host (HOSTS)."""
    return tuple(c.role for c in CONCERNS if hosts is None or c.hosts == hosts)


def get(role):
    """The concern of ``role``, or None."""
    return next((c for c in CONCERNS if c.role == role), None)


def appliers():
    """{module: role} of every concern whose module the node check runs in check mode (node_apply.APPLIERS)."""
    return {c.module: c.role for c in CONCERNS if c.drift}


def applied_together():
    """The roles module apply runs in one call, in site.yml's order."""
    return tuple(c.role for c in CONCERNS if c.in_apply)
