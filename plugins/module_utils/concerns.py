# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The registry of concerns: every concern the collection manages, once, in site.yml's order, with the hosts it
applies to and the module that applies it (the applier, which the node check also runs in check mode for its drift).

Whatever lists the concerns reads them here: the site preflight's roles (filter site_roles), module apply's roles,
the appliers a node runs (node_apply.APPLIERS, checked against this by tests/unit), and the documentation's choices
(checked by tests/repo/test_concerns.py, which also fails on a list of concern names anywhere else). Standard library
only (Python 3.8 targets): the node check ships it.
"""

from collections import namedtuple

# role: the role (and the concern's name); hosts: "gpu" (the GPU nodes), "sm" (the subnet managers) or "every" (both);
# applier: the module that makes the concern's part of the intent true, or None (a role of its own kind: node_check
# installs the check, fabric_validate measures); in_apply: whether module apply runs it in the GPU nodes' plays;
# without: what the preflight adds to a missing required value, where a site can do without the concern.
Concern = namedtuple("Concern", ("role", "hosts", "applier", "in_apply", "without"), defaults=(None,))

CONCERNS = (
    Concern("rdma_core", "gpu", "gpucluster.fabric.rdma_core", True),
    Concern("rdma_modules", "gpu", "gpucluster.fabric.rdma_modules", True),
    Concern("hca_firmware", "gpu", "gpucluster.fabric.hca_firmware", True),
    Concern(
        "fabric_interfaces",
        "gpu",
        "gpucluster.fabric.fabric_interfaces",
        True,
        "or leave fabric_interfaces out of gpucluster_roles",
    ),
    Concern("roce_qos", "gpu", "gpucluster.fabric.roce_qos", True),
    Concern(
        "cuda_repo",
        "gpu",
        "gpucluster.fabric.cuda_repo",
        True,
        "or leave cuda_repo out of gpucluster_roles where the site has its own CUDA repository",
    ),
    Concern(
        "nccl", "gpu", "gpucluster.fabric.nccl", True, "or leave nccl out of gpucluster_roles to not manage NCCL here"
    ),
    Concern("opensm", "sm", "gpucluster.fabric.opensm", False),
    Concern("node_check", "every", None, False),
    Concern("fabric_validate", "gpu", None, False),
)
HOSTS = ("gpu", "sm", "every")


def roles(hosts=None):
    """The concerns' roles in site.yml's order; ``hosts``: only those of that kind of host (HOSTS)."""
    return tuple(c.role for c in CONCERNS if hosts is None or c.hosts == hosts)


def appliers():
    """{applier module: role} of every concern that has an applier."""
    return {c.applier: c.role for c in CONCERNS if c.applier}


def get(role):
    """The concern of ``role``, or None."""
    return next((c for c in CONCERNS if c.role == role), None)


def applied_together():
    """The roles module apply runs in one call, in site.yml's order."""
    return tuple(c.role for c in CONCERNS if c.in_apply)
