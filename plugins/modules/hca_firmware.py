#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)


DOCUMENTATION = r"""
---
module: hca_firmware
short_description: Read, and where asked set, the firmware settings of NVIDIA (Mellanox) adapters with mstconfig
version_added: 0.2.0
description:
  - Role C(gpucluster.fabric.hca_firmware) in one step. For every adapter (every physical function 0 of PCI vendor
    0x15b3 of class network, or O(devices)), runs C(mstconfig -e -d <address> query) for the parameters of
    O(settings) and compares each with the wanted value, current and next boot.
  - With O(apply), sets those whose next-boot value differs, with C(mstconfig -y -d <address> set NAME=VALUE). The
    firmware loads them at the next boot; the result says RV(reboot_required), and the module never reboots.
  - Without O(apply) it only reads; RV(differences) lists what is not as wanted, and the node check's
    C(hca.firmware) check fails on it.
  - Needs C(mstconfig) (Debian's package mstflint, which role rdma_core installs when the site names settings).
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.posix
  - gpucluster.fabric.applier
options:
  settings:
    description:
      - mstconfig parameter name to wanted value (C(ATS_ENABLED), C(PCI_WR_ORDERING), C(LINK_TYPE_P1)); a value is a
        boolean, a number or an enumeration's name (C(force_relax)). Empty reads nothing.
    type: dict
    default: {}
  devices:
    description: PCI addresses to configure; empty means every adapter found.
    type: list
    elements: str
    default: []
  apply:
    description: Set the settings whose next-boot value differs; off, only read and compare.
    type: bool
    default: false
  mstconfig:
    description: The mstconfig command (a name found on the PATH, or an absolute path).
    type: str
    default: mstconfig
"""

EXAMPLES = r"""
- name: ATS on and relaxed PCI write ordering on every adapter, loaded at the next boot
  gpucluster.fabric.hca_firmware:
    settings: {ATS_ENABLED: true, PCI_WR_ORDERING: force_relax}
    apply: true
  register: firmware
"""

RETURN = r"""
devices:
  description:
    - Per PCI address, C(device_type) (ConnectX7) and per setting C(wanted), C(current), C(next) (as mstconfig
      prints them, V(True(1))), C(reported), C(current_ok) and C(next_ok).
  returned: always
  type: dict
differences:
  description: One line per setting not as wanted now or at the next boot, with both values.
  returned: always
  type: list
  elements: str
reboot_required:
  description: A setting's next-boot value is the wanted one and its current value is not.
  returned: always
  type: bool
changes:
  description: The settings set (or, in check mode, to be set), each with why.
  returned: always
  type: list
  elements: dict
  sample: [{what: "0000:17:00.0 ATS_ENABLED", why: "next boot False(0), wanted True"}]
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.hca_firmware import ARGUMENT_SPEC, run  # noqa: E402


def main():
    run(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True))


if __name__ == "__main__":
    main()
