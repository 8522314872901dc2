#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)


DOCUMENTATION = r"""
---
module: fabric_link_info
short_description: Report what the kernel says about fabric network interfaces
version_added: 0.1.0
description:
  - Reads C(/sys/class/net/<name>) for each interface, without changing anything.
  - Reports whether the interface exists, its MTU, IPoIB mode, driver, and whether it is an enhanced IPoIB
    device (ConnectX-4 or newer, driven by mlx5), which supports datagram mode only.
options:
  names:
    description: Interface names to look at.
    type: list
    elements: str
    required: true
  sysfs_root:
    description: Where sysfs is mounted (tests point it at a directory tree).
    type: path
    default: /sys
author: gpucluster.fabric maintainers (@gpucluster)
"""

EXAMPLES = r"""
- name: Read the fabric interfaces' state
  gpucluster.fabric.fabric_link_info:
    names: [ib0, ens1f0]
  register: __links
"""

RETURN = r"""
links:
  description: One entry per requested name.
  returned: always
  type: dict
  sample:
    ib0:
      name: ib0
      exists: true
      mtu: 4092
      operstate: up
      admin_up: true
      type: 32
      infiniband: true
      mode: datagram
      driver: mlx5_core
      enhanced_ipoib: true
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_link import read_link  # noqa: E402


def main():
    module = AnsibleModule(
        argument_spec={
            "names": {"type": "list", "elements": "str", "required": True},
            "sysfs_root": {"type": "path", "default": "/sys"},
        },
        supports_check_mode=True,
    )
    links = {name: read_link(name, module.params["sysfs_root"]) for name in module.params["names"]}
    module.exit_json(changed=False, links=links)


if __name__ == "__main__":
    main()
