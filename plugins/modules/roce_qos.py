#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)


DOCUMENTATION = r"""
---
module: roce_qos
short_description: Apply RoCEv2 lossless QoS (PFC, DSCP map, ECN, RDMA-CM default ToS) to RoCE interfaces
version_added: 0.2.0
description:
  - For each interface, reads PFC and the DSCP-to-priority table with C(dcb) (iproute2), mlx5's per-priority ECN
    switches in sysfs and RDMA-CM's default ToS of the interface's RDMA port in configfs, and writes only what
    differs from O(interfaces).
  - A NIC trusts DSCP while its DSCP table has entries (mlx5 switches trust on the first entry); O(interfaces)
    C(trust=pcp) empties the table.
  - A setting the device cannot take (no DCB on virtio or Soft-RoCE, no ECN switches outside mlx5, no RDMA device,
    no rdma_cm configfs) is reported C(unsupported) with its reason and a warning; the module fails on it only for
    PFC with O(require_pfc=true).
  - The same code (module_utils/roce_qos_apply.py) is what role gpucluster.fabric.roce_qos runs at boot.
options:
  interfaces:
    description:
      - Interface name to settings C(trust) (dscp or pcp), C(pfc_priorities) (list of 0-7), C(dscp_map) (DSCP to
        priority), C(tos) (0-255) and C(ecn) (bool), already validated (role roce_qos's preflight).
    type: dict
    required: true
  require_pfc:
    description: Fail when an interface cannot take PFC (its driver has no DCB support).
    type: bool
    default: false
  warn_unsupported:
    description: Warn once per setting that could not be applied (fabric_validate, which reports them, turns it off).
    type: bool
    default: true
  sysfs_root:
    description: Where the tree holding C(sys/) is (tests use a synthesised one).
    type: path
    default: /
  configfs_root:
    description: Where configfs is mounted.
    type: path
    default: /sys/kernel/config
  persist:
    description:
      - Also make the settings hold at every boot and for every new RDMA device, writing only what differs - the code
        this module runs (C(/usr/local/lib/gpucluster-fabric/gpucluster_fabric_roce_qos/roce_qos_apply.py)) with
        its entry point C(roce_qos_boot.py) beside it (both the collection's module_utils, as the module ran them),
        the settings C(/etc/gpucluster/roce_qos.json), the enabled oneshot unit C(gpucluster-roce-qos.service) and
        the udev rule C(/etc/udev/rules.d/90-gpucluster-roce-qos.rules) - and reloading systemd or udev only when
        their file changed.
    type: bool
    default: false
  boot_wait_seconds:
    description: How long the unit waits at boot for every interface's RDMA device before applying what it can.
    type: int
    default: 120
  header:
    description:
      - The comment block the unit and the udev rule start with (the role passes the variable C(ansible_managed),
        default C(Ansible managed), through the C(comment) filter).
    type: str
    default: ""
  root:
    description:
      - Directory that stands for C(/) for the files of O(persist) (tests); systemd and udev are reloaded only for C(/).
    type: path
    default: /
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.posix
attributes:
  check_mode:
    support: full
    details: In check mode it reads everything and reports what it would change (state C(changed)); fabric_validate
      reads the live QoS back this way.
  diff_mode:
    support: full
    details: The files of O(persist).
"""

EXAMPLES = r"""
- name: Lossless RoCE on ens1f0np0 (DSCP 26 on priority 3, ECN, ToS 106)
  gpucluster.fabric.roce_qos:
    interfaces:
      ens1f0np0: {trust: dscp, pfc_priorities: [3], dscp_map: {26: 3, 48: 6}, tos: 106, ecn: true}
"""

RETURN = r"""
interfaces:
  description: Per interface, per setting (C(pfc), C(dscp_map), C(ecn), C(tos)) the state (C(ok), C(changed) or
    C(unsupported)), the value wanted, the value found and, where unsupported, the reason; C(rdma_port) is the RDMA
    device/port whose GIDs sit on the interface.
  returned: always
  type: dict
  sample: {eth1: {pfc: {state: unsupported, wanted: [3], current: null, reason: "the driver of eth1 has no DCB
    support (dcb: Attribute read: Operation not supported)"}, tos: {state: ok, wanted: 106, current: 106},
    rdma_port: rxe0/1}}
unsupported:
  description: One line per setting that could not be applied, with the reason.
  returned: always
  type: list
  elements: str
settings:
  description: O(interfaces) as asked (role roce_qos registers the result as the fact C(gpucluster_roce_qos)).
  returned: always
  type: dict
require_pfc:
  description: O(require_pfc) as asked.
  returned: always
  type: bool
changes:
  description: What O(persist) changed (or, in check mode, would), each with why.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.roce_qos_node import (  # noqa: E402
    ARGUMENT_SPEC,
    run,
)


def main():
    run(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True))


if __name__ == "__main__":
    main()
