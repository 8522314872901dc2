#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)


DOCUMENTATION = r"""
---
module: fabric_link
short_description: Set IPoIB mode, MTU and an address on a fabric interface at run time, without a needless flap
version_added: 0.1.0
description:
  - Compares the interface with what is wanted and changes only what differs; an interface that is already right
    is left alone (no link bounce).
  - The IPoIB mode is written to C(/sys/class/net/<name>/mode) before the MTU, because a mode change resets the MTU
    to the mode's maximum.
  - The MTU is changed with C(ip link set dev <name> mtu <mtu>) while the link stays up. Only when the kernel refuses
    that and O(link_down_ok=true) is the link taken down for the change and brought up again.
  - The address is added when missing; other addresses are left in place.
options:
  name:
    description: Interface name.
    type: str
    required: true
  mode:
    description:
      - IPoIB mode. Ignored, with a warning, when the device has no C(mode) attribute (it is not an IPoIB netdev).
    type: str
    choices: [datagram, connected]
  mtu:
    description: Wanted MTU in bytes.
    type: int
  address:
    description: Address in CIDR form to add when missing.
    type: str
  link_down_ok:
    description: Allow taking the link down when the kernel refuses an MTU change on a running link.
    type: bool
    default: false
  sysfs_root:
    description: Where sysfs is mounted.
    type: path
    default: /sys
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.posix
attributes:
  check_mode:
    support: full
    details: In check mode it reports what it would change and changes nothing.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Put ib0 in datagram mode with MTU 4092
  gpucluster.fabric.fabric_link:
    name: ib0
    mode: datagram
    mtu: 4092
    address: 10.10.0.11/16
"""

RETURN = r"""
before:
  description: Mode, MTU, admin state and addresses found.
  returned: always
  type: dict
after:
  description: Mode, MTU, admin state and addresses after the run (predicted in check mode).
  returned: always
  type: dict
actions:
  description: What was done (or would be done in check mode), in order.
  returned: always
  type: list
  elements: str
  sample: ["ib0: mode connected -> datagram", "ib0: mtu 2044 -> 4092"]
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_link import LinkApplier  # noqa: E402


class FabricLink(LinkApplier):
    """One interface from the module's parameters; the result as the module returns it."""

    def __init__(self, module):
        super().__init__(module, module.params["sysfs_root"])

    def run(self):
        spec = {key: self.module.params[key] for key in ("name", "mode", "mtu", "address", "link_down_ok")}
        before, after = self.apply(spec)
        self.module.exit_json(changed=bool(self.actions), actions=self.actions, before=before, after=after)


def main():
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "mode": {"type": "str", "choices": ["datagram", "connected"]},
            "mtu": {"type": "int"},
            "address": {"type": "str"},
            "link_down_ok": {"type": "bool", "default": False},
            "sysfs_root": {"type": "path", "default": "/sys"},
        },
        supports_check_mode=True,
    )
    if not LinkApplier.valid_name(module.params["name"]):
        module.fail_json(msg="name {!r} is not an interface name".format(module.params["name"]))
    FabricLink(module).run()


if __name__ == "__main__":
    main()
