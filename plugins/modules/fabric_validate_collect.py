#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: fabric_validate_collect
short_description: Read everything role fabric_validate judges on a host, in one call
description:
  - Returns the RDMA devices and ports (as M(gpucluster.fabric.ib_port_info)), the GPUs and GPU to NIC affinity (as
    M(gpucluster.fabric.gpu_topology_info)), the content of C(nccl.conf) and the MTU of every expected interface.
  - Role fabric_validate calls it once per host (again, with C(retries), while a port waits for the subnet manager).
  - Reads only; never changes anything. Safe in check mode.
version_added: 0.1.0
author: gpucluster.fabric maintainers (@gpucluster)
options:
  nccl_conf_path:
    description: NCCL configuration file to read (not below O(root)).
    type: path
    default: /etc/nccl.conf
  interfaces:
    description:
      - Interfaces whose MTU is read from C(<root>/sys/class/net/<name>/mtu), each C({name, expected_mtu}) (what the
        C(gpucluster.fabric.fabric_expected_mtus) filter returns).
    type: list
    elements: dict
    default: []
extends_documentation_fragment:
  - gpucluster.fabric.fabric_probe
  - gpucluster.fabric.fabric_probe.rdma
  - gpucluster.fabric.fabric_probe.gpu
notes:
  - A host without RDMA devices or without nvidia-smi returns C(ib.rdma_present=false) or C(gpu.gpu_present=false);
    callers report them as skipped, not passed.
"""

EXAMPLES = r"""
- name: Read the fabric, GPU and configuration state
  gpucluster.fabric.fabric_validate_collect:
    modules: [ib_core, ib_uverbs, rdma_ucm]
    interfaces: "{{ fabric_interfaces | gpucluster.fabric.fabric_expected_mtus }}"
  register: collected
"""

RETURN = r"""
ib:
  description: rdma_present, devices and modules_loaded, as M(gpucluster.fabric.ib_port_info) returns them.
  returned: always
  type: dict
gpu:
  description: gpu_present, skipped_reason, gpus, affinity, nic_count and flagged, as
    M(gpucluster.fabric.gpu_topology_info) returns them (without the raw topology).
  returned: always
  type: dict
nccl_conf:
  description: C(path) and C(content) of the NCCL configuration file; content is null when the file does not exist.
  returned: always
  type: dict
  sample: {path: /etc/nccl.conf, content: "NCCL_IB_HCA=mlx5_0\n"}
interfaces:
  description: One entry per requested interface - name, expected_mtu and mtu (null when the interface is absent).
  returned: always
  type: list
  elements: dict
  sample: [{name: eth1, expected_mtu: 4200, mtu: 4200}]
"""

import os  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_probe import (  # noqa: E402
    GPU_ARGUMENT_SPEC,
    RDMA_ARGUMENT_SPEC,
    probe_gpus,
    probe_rdma,
)
from ansible_collections.gpucluster.fabric.plugins.module_utils.rdma_sysfs import read_interface_mtus  # noqa: E402

GPU_KEYS = ("gpu_present", "skipped_reason", "gpus", "affinity", "nic_count", "flagged")


def build_module():
    return AnsibleModule(
        argument_spec={
            **RDMA_ARGUMENT_SPEC,
            **GPU_ARGUMENT_SPEC,
            "nccl_conf_path": {"type": "path", "default": "/etc/nccl.conf"},
            "interfaces": {"type": "list", "elements": "dict", "default": []},
        },
        supports_check_mode=True,
    )


def read_nccl_conf(path):
    """(content or None when the file does not exist, error)."""
    if not os.path.exists(path):
        return None, None
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(), None
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror}"


def main():
    module = build_module()
    params = module.params
    ib, error = probe_rdma(module, params["root"], params["modules"], params["use_ibv_devinfo"])
    if error:
        module.fail_json(msg=error)
    gpu, error = probe_gpus(module, params["max_nic_distance"])
    if error:
        module.fail_json(msg=error, ib=ib)
    content, error = read_nccl_conf(params["nccl_conf_path"])
    if error:
        module.fail_json(msg=error, ib=ib)
    module.exit_json(
        changed=False,
        ib=ib,
        gpu={key: gpu[key] for key in GPU_KEYS},
        nccl_conf={"path": params["nccl_conf_path"], "content": content},
        interfaces=read_interface_mtus(params["interfaces"], params["root"]),
    )


if __name__ == "__main__":
    main()
