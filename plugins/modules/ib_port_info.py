#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: ib_port_info
short_description: Report RDMA devices and ports from sysfs
description:
  - Reads C(/sys/class/infiniband) (below O(root)) and returns every RDMA device with its ports - state, physical
    state, rate, link layer, LID, GIDs with their RoCE type and netdev, and the active MTU.
  - sysfs has no active MTU attribute. For RoCE ports it is derived from the netdev MTU (largest IB MTU that fits
    the netdev MTU minus 96 bytes of headers); when O(root=/) and C(ibv_devinfo) is installed, C(ibv_devinfo -v)
    supplies it for every port. RV(devices[].ports[].active_mtu_source) says which one was used.
  - Reads only; never changes anything. Safe in check mode.
version_added: 0.1.0
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.info_module
  - gpucluster.fabric.attributes.posix
  - gpucluster.fabric.fabric_probe.rdma
notes:
  - A host without RDMA devices returns RV(rdma_present=false); callers should report it as skipped, not passed.
"""

EXAMPLES = r"""
- name: Read RDMA ports
  gpucluster.fabric.ib_port_info:
    modules: [ib_core, ib_uverbs, rdma_ucm]
  register: ib

- name: Inspect a captured sysfs tree
  gpucluster.fabric.ib_port_info:
    root: /srv/captures/node17
"""

RETURN = r"""
rdma_present:
  description: Whether at least one RDMA device exists.
  returned: always
  type: bool
devices:
  description: RDMA devices.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Device name, for example mlx5_0 or rxe0.
      type: str
      returned: always
    node_guid:
      description: Node GUID as sysfs prints it.
      type: str
      returned: always
    node_type:
      description: CA, switch or router.
      type: str
      returned: always
    fw_ver:
      description: Firmware version.
      type: str
      returned: always
    ports:
      description: Ports of the device.
      type: list
      elements: dict
      returned: always
      contains:
        port:
          description: Port number.
          type: int
          returned: always
        state:
          description: Logical state - ACTIVE, DOWN, INIT or ARMED.
          type: str
          returned: always
        phys_state:
          description: Physical state - LinkUp, Polling, Disabled and so on.
          type: str
          returned: always
        rate:
          description: Rate as sysfs prints it.
          type: str
          returned: always
          sample: 400 Gb/sec (4X NDR)
        rate_gbps:
          description: Rate in Gb/s.
          type: float
          returned: always
        link_layer:
          description: InfiniBand or Ethernet.
          type: str
          returned: always
        lid:
          description: Port LID (0 on RoCE).
          type: int
          returned: always
        sm_lid:
          description: LID of the subnet manager.
          type: int
          returned: always
        gids:
          description: Populated GID entries, each with index, gid, type (RoCE v1/v2, IB) and ndev.
          type: list
          elements: dict
          returned: always
        netdev:
          description: Netdev of the port (RoCE).
          type: str
          returned: always
        netdev_mtu:
          description: MTU of that netdev.
          type: int
          returned: always
        active_mtu:
          description: Active IB MTU in bytes; null when it cannot be known.
          type: int
          returned: always
        active_mtu_source:
          description: Where the active MTU came from - netdev_mtu, ibv_devinfo, or null.
          type: str
          returned: always
modules_loaded:
  description: For each requested module, whether it is loaded.
  returned: always
  type: dict
  sample: {ib_core: true, nvidia_peermem: false}
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_probe import (  # noqa: E402
    RDMA_ARGUMENT_SPEC,
    probe_rdma,
)


def build_module():
    return AnsibleModule(argument_spec=dict(RDMA_ARGUMENT_SPEC), supports_check_mode=True)


def main():
    module = build_module()
    params = module.params
    result, error = probe_rdma(module, params["root"], params["modules"], params["use_ibv_devinfo"])
    if error:
        module.fail_json(msg=error)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
