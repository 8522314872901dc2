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
author: gpucluster.fabric maintainers (!UNKNOWN)
options:
  root:
    description:
      - Directory that stands for C(/). Point it at a captured or synthesised tree to inspect it instead of the
        live system.
    type: path
    default: /
  modules:
    description: Kernel modules whose presence under C(<root>/sys/module) is reported in RV(modules_loaded).
    type: list
    elements: str
    default: []
  use_ibv_devinfo:
    description: Run C(ibv_devinfo -v) for the active MTU when it is installed and O(root=/).
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
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

import os  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.rdma_sysfs import (  # noqa: E402
    loaded_modules,
    merge_ibv_devinfo,
    parse_ibv_devinfo,
    read_rdma_devices,
)

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}


def build_module():
    return AnsibleModule(
        argument_spec={
            "root": {"type": "path", "default": "/"},
            "modules": {"type": "list", "elements": "str", "default": []},
            "use_ibv_devinfo": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )


def main():
    module = build_module()
    root = module.params["root"]
    if not os.path.isdir(root):
        module.fail_json(msg=f"root={root} is not a directory")
    devices = read_rdma_devices(root)
    if devices and module.params["use_ibv_devinfo"] and os.path.realpath(root) == "/":
        ibv_devinfo = module.get_bin_path("ibv_devinfo")
        if ibv_devinfo:
            module.run_command_environ_update = C_LOCALE
            rc, out, err = module.run_command([ibv_devinfo, "-v"])
            if rc == 0:
                merge_ibv_devinfo(devices, parse_ibv_devinfo(out))
            else:
                module.warn(f"ibv_devinfo -v failed (rc={rc}): {err.strip()}")
    module.exit_json(
        changed=False,
        rdma_present=bool(devices),
        devices=devices,
        modules_loaded=loaded_modules(module.params["modules"], root),
    )


if __name__ == "__main__":
    main()
