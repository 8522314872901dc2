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
  sample: ["mode connected -> datagram", "mtu 2044 -> 4092"]
"""

import ipaddress  # noqa: E402
import os  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_link import mode_path, parse_ip_addr, read_link  # noqa: E402


def _same_address(wanted, present):
    try:
        wanted_if = ipaddress.ip_interface(wanted)
    except ValueError:
        return False
    for item in present:
        try:
            if ipaddress.ip_interface(item) == wanted_if:
                return True
        except ValueError:
            continue
    return False


class FabricLink:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.ip = module.get_bin_path("ip", required=True)
        self.actions = []

    def run_ip(self, *args):
        return self.module.run_command([self.ip] + list(args), environ_update={"LC_ALL": "C"})

    def addresses(self, name):
        rc, out, err = self.run_ip("-o", "addr", "show", "dev", name)
        if rc != 0:
            self.module.fail_json(msg=f"ip addr show dev {name} failed: {err.strip()}")
        return parse_ip_addr(out)

    def state(self, name):
        link = read_link(name, self.params["sysfs_root"])
        if not link["exists"]:
            self.module.fail_json(msg=f"interface {name} does not exist (see ip -br link)")
        link["addresses"] = self.addresses(name)
        return {key: link[key] for key in ("mode", "mtu", "admin_up", "addresses")}

    def set_mode(self, name, before):
        wanted = self.params["mode"]
        if wanted is None:
            return before["mtu"]
        if before["mode"] is None:
            self.module.warn(
                "{} has no {}: it is not an IPoIB netdev, mode {} not applied".format(name, "mode", wanted)
            )
            return before["mtu"]
        if before["mode"] == wanted:
            return before["mtu"]
        self.actions.append("mode {} -> {}".format(before["mode"], wanted))
        if self.module.check_mode:
            return None
        try:
            with open(mode_path(name, self.params["sysfs_root"]), "w") as handle:
                handle.write(wanted + "\n")
        except OSError as exc:
            self.module.fail_json(msg=f"writing {wanted} to {mode_path(name)} failed: {exc}")
        return read_link(name, self.params["sysfs_root"])["mtu"]

    def set_mtu(self, name, current_mtu, admin_up):
        wanted = self.params["mtu"]
        if wanted is None or current_mtu == wanted:
            return
        self.actions.append(f"mtu {current_mtu} -> {wanted}")
        if self.module.check_mode:
            return
        rc, dummy, err = self.run_ip("link", "set", "dev", name, "mtu", str(wanted))
        if rc == 0:
            return
        if not (self.params["link_down_ok"] and admin_up):
            self.module.fail_json(
                msg=f"{name}: the kernel refused mtu {wanted} on the running link ({err.strip()}); set "
                "fabric_interfaces_link_down_ok: true to allow taking the link down for the change",
                actions=self.actions,
            )
        self.actions.append("link down/up for the mtu change")
        for args in (("down",), ("mtu", str(wanted)), ("up",)):
            rc, dummy, err = self.run_ip("link", "set", "dev", name, *args)
            if rc != 0:
                self.module.fail_json(msg="ip link set dev {} {} failed: {}".format(name, " ".join(args), err.strip()))

    def set_up(self, name, admin_up):
        if admin_up:
            return
        self.actions.append("link up")
        if not self.module.check_mode:
            rc, dummy, err = self.run_ip("link", "set", "dev", name, "up")
            if rc != 0:
                self.module.fail_json(msg=f"ip link set dev {name} up failed: {err.strip()}")

    def add_address(self, name, addresses):
        wanted = self.params["address"]
        if not wanted or _same_address(wanted, addresses):
            return
        self.actions.append(f"address {wanted} added")
        if not self.module.check_mode:
            rc, dummy, err = self.run_ip("addr", "add", wanted, "dev", name)
            if rc != 0:
                self.module.fail_json(msg=f"ip addr add {wanted} dev {name} failed: {err.strip()}")

    def run(self):
        name = self.params["name"]
        before = self.state(name)
        mtu_after_mode = self.set_mode(name, before)
        self.set_mtu(name, mtu_after_mode, before["admin_up"])
        self.set_up(name, before["admin_up"])
        self.add_address(name, before["addresses"])
        if self.module.check_mode:
            after = dict(before, admin_up=True)
            if self.params["mode"] and before["mode"] is not None:
                after["mode"] = self.params["mode"]
            if self.params["mtu"] is not None:
                after["mtu"] = self.params["mtu"]
            if self.params["address"] and not _same_address(self.params["address"], before["addresses"]):
                after["addresses"] = before["addresses"] + [self.params["address"]]
        else:
            after = self.state(name)
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
    if "/" in module.params["name"] or not os.path.basename(module.params["name"]):
        module.fail_json(msg="name {!r} is not an interface name".format(module.params["name"]))
    FabricLink(module).run()


if __name__ == "__main__":
    main()
