#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)


DOCUMENTATION = r"""
---
module: fabric_interfaces
short_description: Persist and apply the fabric interfaces of a host - backend files, sysctls, links, Soft-RoCE
version_added: 0.2.0
description:
  - The applier of role M(gpucluster.fabric.fabric_interfaces)'s steps, in one run and in this order, each changing
    only what differs from the live state.
  - C(configure) writes the files the network backend reads (netplan, systemd-networkd, NetworkManager keyfiles or
    ifupdown stanzas; for netplan and systemd-networkd also a udev rule that sets the IPoIB mode when the device
    appears) and, only when one of them changed, makes the backend re-read them (C(netplan generate),
    C(networkctl reload), C(nmcli connection reload), C(udevadm control --reload)); none of these takes a link down.
    With ifupdown, C(ifquery) reads every stanza back.
  - C(sysctl) persists O(sysctls) in O(sysctl_file) and sets now those this kernel exposes here; the others (a
    container's namespace lacks the neighbour-table ones) are returned in RV(pending).
  - C(run) sets each running interface's IPoIB mode, then its MTU while the link stays up (down and up only when the
    kernel refuses and O(link_down_ok)), brings it up and adds its address when missing.
  - C(softroce) installs a boot unit per Soft-RoCE device (rxe devices do not persist), enables it and starts it where
    the kernel has C(rdma_rxe); without C(rdma_rxe) the device is returned in RV(pending).
  - The input is checked by the role's preflight (C(tasks/preflight.yml)) before any host changes.
options:
  interfaces:
    description:
      - The role's C(fabric_interfaces) entries (C(name), C(kind), C(mode), C(mtu), C(address), C(softroce)), already
        checked; the defaults are filled in here (plugins/module_utils/fabric_model.py C(normalise_interface)).
    type: list
    elements: dict
    required: true
  backend:
    description: The backend that persists the interfaces; V(auto) detects it as the role's preflight does.
    type: str
    default: auto
    choices: [auto, netplan, systemd-networkd, NetworkManager, ifupdown, none]
  sysctls:
    description: Sysctl name to value (the role computes them from the rails, peers and its switches).
    type: dict
    default: {}
  sysctl_file:
    description: The sysctl.d file they are persisted in.
    type: path
    default: /etc/sysctl.d/60-gpucluster-fabric.conf
  apply_runtime:
    description: Whether step C(run) changes the running interfaces.
    type: bool
    default: true
  link_down_ok:
    description: Allow taking a link down when the kernel refuses an MTU change on the running link.
    type: bool
    default: false
  run_tags:
    description:
      - The run's C(ansible_run_tags). When it names some steps' tags (C(fabric_interfaces_<step>)), only those steps
        run; otherwise all of them.
    type: list
    elements: str
    default: []
  skip_tags:
    description: The run's C(ansible_skip_tags); the steps whose tags it names do not run.
    type: list
    elements: str
    default: []
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.applier
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.posix
"""

EXAMPLES = r"""
- name: Persist and apply ib0 and a RoCE rail
  gpucluster.fabric.fabric_interfaces:
    interfaces:
      - {name: ib0, kind: ipoib, address: 10.10.0.11/16}
      - {name: ens1f0np0, kind: roce, mtu: 9000, address: 10.20.0.11/16}
    sysctls:
      net.ipv4.conf.all.arp_ignore: 2
    host: "{{ inventory_hostname }}"
    header: "{{ ansible_managed | comment }}"
"""

RETURN = r"""
backend:
  description: The backend the interfaces were persisted on (V(none) when there is none).
  returned: always
  type: str
  sample: netplan
interfaces:
  description: The interfaces with their defaults filled in.
  returned: always
  type: list
  elements: dict
steps:
  description: The steps this run applied.
  returned: always
  type: list
  elements: str
  sample: [configure, sysctl, run, softroce]
pending:
  description:
    - What could not be applied on this host now (C(sysctl <name>), C(softroce <device>)), each for the next boot.
  returned: always
  type: list
  elements: str
changes:
  description: What was changed (or, in check mode, would be), each with why.
  returned: always
  type: list
  elements: dict
  sample: [{what: ib0, why: "mtu 2044 -> 4092"}, {what: /etc/netplan/60-gpucluster-fabric.yaml, why: "it is missing"}]
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_interfaces_apply import (  # noqa: E402
    ARGUMENT_SPEC,
    run,
)


def main():
    run(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True))


if __name__ == "__main__":
    main()
