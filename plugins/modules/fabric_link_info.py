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
  - Reports whether the interface exists, its MTU, link type (C(type), the kernel's ARPHRD number, 1 for
    Ethernet and 32 for InfiniBand), IPoIB mode, driver, and whether it is an enhanced IPoIB device (ConnectX-4 or
    newer, driven by mlx5), which supports datagram mode only.
  - With O(detect_backend=true), also the network backend that persists the host's interfaces, in this order.
    netplan when C(/usr/sbin/netplan) exists and C(/etc/netplan) holds a C(*.yaml) or C(*.yml) file; else
    NetworkManager when C(systemctl is-active) says it runs; else systemd-networkd when it runs; else ifupdown when
    C(/sbin/ifup) and C(/etc/network/interfaces) exist. systemd is asked (once) only when netplan does not decide.
  - With O(sysctls), also which of those sysctls this kernel exposes here (a container's network namespace lacks
    some, such as C(net.ipv4.neigh.default.gc_thresh1)).
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
  detect_backend:
    description: Also report the network backend (RV(backend)).
    type: bool
    default: false
  sysctls:
    description: Sysctl names (dotted, C(net.ipv4.conf.all.rp_filter)) to look for under C(/proc/sys).
    type: list
    elements: str
    default: []
  root:
    description: Root of the file system the backend files and C(/proc/sys) are read from (tests point it at a tree).
    type: path
    default: /
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.info_module
  - gpucluster.fabric.attributes.posix
"""

EXAMPLES = r"""
- name: Read the fabric interfaces' state
  gpucluster.fabric.fabric_link_info:
    names: [ib0, ens1f0]
  register: __links

- name: Read the links, the network backend and the neighbour-table sysctls present
  gpucluster.fabric.fabric_link_info:
    names: [ib0]
    detect_backend: true
    sysctls: [net.ipv4.neigh.default.gc_thresh3]
  register: __host
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
backend:
  description:
    - The network backend (netplan, NetworkManager, systemd-networkd or ifupdown); null when none was found.
  returned: when O(detect_backend=true)
  type: str
  sample: ifupdown
sysctls_present:
  description: The requested O(sysctls) this kernel exposes here, in the order asked.
  returned: always
  type: list
  elements: str
  sample: [net.ipv4.conf.all.rp_filter]
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_link import INFO_ARGUMENT_SPEC, info  # noqa: E402


def build_module():
    return AnsibleModule(argument_spec=INFO_ARGUMENT_SPEC, supports_check_mode=True)


def main():
    info(build_module())


if __name__ == "__main__":
    main()
