# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Options shared by the modules that read a host through plugins/module_utils/fabric_probe.py (their attributes
are in the attributes fragment)."""


class ModuleDocFragment:
    # The options of fabric_probe.RDMA_ARGUMENT_SPEC.
    RDMA = r"""
options:
  root:
    description:
      - Directory that stands for C(/). Point it at a captured or synthesised tree to inspect it instead of the
        live system.
    type: path
    default: /
  modules:
    description: Kernel modules whose presence under C(<root>/sys/module) is reported (C(modules_loaded)).
    type: list
    elements: str
    default: []
  use_ibv_devinfo:
    description: Run C(ibv_devinfo -v) for the active MTU when it is installed and O(root=/).
    type: bool
    default: true
"""

    # The options of fabric_probe.GPU_ARGUMENT_SPEC.
    GPU = r"""
options:
  max_nic_distance:
    description: Farthest acceptable GPU to NIC connection type.
    type: str
    default: PXB
    choices: [PIX, PXB, PHB, NODE, SYS]
"""
