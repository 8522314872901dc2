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
  - Reads only. Safe in check mode. A host without C(nvidia-smi) returns RV(gpu_present=false) with a reason.
version_added: 0.1.0
author: gpucluster.fabric maintainers (!UNKNOWN)
options:
  max_nic_distance:
    description: Farthest acceptable GPU to NIC connection type.
    type: str
    default: PXB
    choices: [PIX, PXB, PHB, NODE, SYS]
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
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
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
from ansible_collections.gpucluster.fabric.plugins.module_utils.nvidia_smi import (  # noqa: E402
    gpu_nic_affinity,
    parse_query_gpu_csv,
    parse_topo_matrix,
    summarize_gpus,
)

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}
QUERY_FIELDS = "index,name,pci.bus_id,driver_version,memory.total"


def build_module():
    return AnsibleModule(
        argument_spec={
            "max_nic_distance": {"type": "str", "default": "PXB", "choices": ["PIX", "PXB", "PHB", "NODE", "SYS"]},
            "topo_text": {"type": "str"},
            "query_text": {"type": "str"},
        },
        required_together=[("topo_text", "query_text")],
        supports_check_mode=True,
    )


def _run(module, binary, args):
    rc, out, err = module.run_command([binary] + args)
    if rc != 0:
        return None, f"nvidia-smi {' '.join(args)} failed (rc={rc}): {(err or out).strip()}"
    return out, None


def main():
    module = build_module()
    result = {
        "changed": False,
        "gpu_present": False,
        "skipped_reason": None,
        "gpus": [],
        "topology": {},
        "affinity": [],
        "nic_count": 0,
        "flagged": [],
    }
    topo_text = module.params["topo_text"]
    query_text = module.params["query_text"]
    if topo_text is None:
        binary = module.get_bin_path("nvidia-smi")
        if not binary:
            result["skipped_reason"] = "nvidia-smi not found"
            module.exit_json(**result)
        module.run_command_environ_update = C_LOCALE
        query_text, error = _run(module, binary, ["--query-gpu=" + QUERY_FIELDS, "--format=csv"])
        if error:
            # nvidia-smi present but no usable driver/GPU: report why, do not pretend the host passed.
            result["skipped_reason"] = error
            module.exit_json(**result)
        topo_text, error = _run(module, binary, ["topo", "-m"])
        if error:
            module.fail_json(msg=error, **result)
    gpus = summarize_gpus(parse_query_gpu_csv(query_text))
    topology = parse_topo_matrix(topo_text)
    affinity = gpu_nic_affinity(topology, module.params["max_nic_distance"])
    result.update(
        gpu_present=bool(gpus),
        skipped_reason=None if gpus else "no GPU reported by nvidia-smi",
        gpus=gpus,
        topology=topology,
        affinity=affinity,
        nic_count=len([d for d in topology["devices"] if not d.startswith("GPU")]),
        flagged=[a["gpu"] for a in affinity if a["flagged"]],
    )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
