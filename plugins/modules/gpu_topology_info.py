#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: gpu_topology_info
short_description: Report GPUs and the GPU to NIC affinity matrix from nvidia-smi
description:
  - Runs C(nvidia-smi --query-gpu) and C(nvidia-smi topo -m) and returns the GPUs, the topology matrix and, for each
    GPU, its nearest NIC and their distance.
  - GPUs whose nearest NIC is farther than O(max_nic_distance) (default PXB, NCCL's default C(NCCL_NET_GDR_LEVEL))
    are flagged - NCCL will not use GPUDirect RDMA for them.
  - Reads only. Safe in check mode. A host without C(nvidia-smi) returns RV(gpu_present=false) with a reason; one whose
    C(nvidia-smi) fails (a GPU off the bus) fails the task, saying why (RV(failed_reason)).
version_added: 0.1.0
author: gpucluster.fabric maintainers (@gpucluster)
options:
  topo_text:
    description:
      - Captured C(nvidia-smi topo -m) output to parse instead of running nvidia-smi (for sites that collect it
        another way, and for tests). Requires O(query_text).
    type: str
  query_text:
    description:
      - Captured C(nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv) output.
    type: str
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.info_module
  - gpucluster.fabric.attributes.posix
  - gpucluster.fabric.fabric_probe.gpu
"""

EXAMPLES = r"""
- name: Read GPU topology
  gpucluster.fabric.gpu_topology_info:
  register: gpu

- name: Show GPUs whose nearest NIC is too far for GPUDirect RDMA
  ansible.builtin.debug:
    msg: "{{ gpu.affinity | selectattr('flagged') | list }}"
"""

RETURN = r"""
gpu_present:
  description: Whether GPUs were found.
  returned: always
  type: bool
skipped_reason:
  description: Why nothing was inspected (no nvidia-smi, no GPU); null otherwise.
  returned: always
  type: str
failed_reason:
  description: Why the installed C(nvidia-smi) could not read the GPUs (a GPU off the bus, a driver that does not
    answer); the module then fails. Null otherwise.
  returned: always
  type: str
  version_added: 0.2.0
gpus:
  description: One entry per GPU.
  returned: always
  type: list
  elements: dict
  sample: [{index: 0, name: NVIDIA H200, pci_bus_id: "00000000:00:06.0", driver_version: 580.159.04,
            memory_total_mib: 143771}]
topology:
  description: Parsed C(nvidia-smi topo -m) (devices, matrix, affinity columns, NIC legend).
  returned: always
  type: dict
affinity:
  description: For each GPU, the nearest NIC, its distance, and whether it is flagged (with a reason).
  returned: always
  type: list
  elements: dict
nic_count:
  description: Number of NICs in the topology matrix.
  returned: always
  type: int
flagged:
  description: GPUs whose nearest NIC is farther than O(max_nic_distance).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_probe import (  # noqa: E402
    GPU_ARGUMENT_SPEC,
    probe_gpus,
)


def build_module():
    return AnsibleModule(
        argument_spec={
            **GPU_ARGUMENT_SPEC,
            "topo_text": {"type": "str"},
            "query_text": {"type": "str"},
        },
        required_together=[("topo_text", "query_text")],
        supports_check_mode=True,
    )


def main():
    module = build_module()
    params = module.params
    result, error = probe_gpus(module, params["max_nic_distance"], params["topo_text"], params["query_text"])
    error = error or result["failed_reason"]
    if error:
        module.fail_json(msg=error, changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
