# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The appliers of one play in one remote call (module apply): each step is the applier module's own code and argument
spec (plugins/module_utils/host_checks.py runs it), in order, and a step that fails stops the ones after it, as the
role's tasks would have stopped there.
"""

from . import (
    cuda_repo_probe,
    fabric_interfaces_apply,
    hca_firmware,
    nccl,
    opensm_apply,
    rdma_core,
    rdma_modules,
    roce_qos_node,
)


def _changes(args):
    return True


# module name -> (argument spec, run(module), arguments accepted, the spec's other rules)
APPLIERS = {
    "gpucluster.fabric.rdma_core": (rdma_core.ARGUMENT_SPEC, rdma_core.run, _changes),
    "gpucluster.fabric.rdma_modules": (rdma_modules.ARGUMENT_SPEC, rdma_modules.run, _changes),
    "gpucluster.fabric.hca_firmware": (hca_firmware.ARGUMENT_SPEC, hca_firmware.run, _changes),
    "gpucluster.fabric.cuda_repo": (cuda_repo_probe.APPLY_ARGUMENT_SPEC, cuda_repo_probe.apply, _changes),
    "gpucluster.fabric.nccl": (nccl.ARGUMENT_SPEC, nccl.run, _changes),
    "gpucluster.fabric.fabric_interfaces": (
        fabric_interfaces_apply.ARGUMENT_SPEC,
        fabric_interfaces_apply.run,
        _changes,
    ),
    "gpucluster.fabric.opensm": (opensm_apply.ARGUMENT_SPEC, opensm_apply.run, _changes),
    "gpucluster.fabric.roce_qos": (roce_qos_node.ARGUMENT_SPEC, roce_qos_node.run, _changes),
}
