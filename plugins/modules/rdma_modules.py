#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: rdma_modules
short_description: Load and persist the RDMA kernel modules and set up GPUDirect RDMA, changing only what differs
description:
  - Role C(gpucluster.fabric.rdma_modules) in one step. Checks the input (every problem at once), reads what decides
    GPUDirect RDMA (as M(gpucluster.fabric.gpudirect_facts) does) and fails, before any change, when a requested mode
    or module loading cannot be honoured.
  - Then writes C(/etc/modules-load.d/gpucluster-rdma.conf) (every module the host loads at boot, in load order) and
    C(/etc/modprobe.d/gpucluster-rdma.conf) (softdep lines, removed when none are asked for), loads the modules that
    are not loaded yet where modules can be loaded here, and for GPUDirect mode peermem loads C(nvidia_peermem) before
    it writes C(/etc/modules-load.d/gpucluster-nvidia-peermem.conf), which it removes otherwise (an entry that
    cannot load fails systemd-modules-load on every boot).
  - Only what differs from the live state is changed, each change returned with its reason (RV(changes)).
version_added: 0.2.0
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.posix
  - gpucluster.fabric.applier
options:
  mode:
    description: The requested GPUDirect RDMA mode; V(auto) decides from the host.
    type: str
    choices: [auto, peermem, dmabuf, none]
    default: auto
  nccl_version:
    description: NCCL version the jobs use; empty reads dpkg C(libnccl2).
    type: str
    default: ""
  core_modules:
    description: ib_core and the user-space access modules (role variable C(rdma_modules_core)).
    type: list
    elements: str
    default: []
  extra_modules:
    description: Further modules the site needs (C(rdma_modules_extra)).
    type: list
    elements: str
    default: []
  interfaces:
    description:
      - The fabric interfaces (C(fabric_interfaces) entries); C(ib_ipoib) is loaded for a C(kind=ipoib) entry,
        C(rdma_rxe) for a C(kind=roce) entry with C(softroce).
    type: list
    elements: raw
    default: []
  hca_detect:
    description: Add the drivers of the NVIDIA/Mellanox adapters found on the PCI bus.
    type: bool
    default: true
  hca_driver_map:
    description: Driver bound to an adapter -> the kernel modules that adapter needs for RDMA.
    type: dict
    default: {}
  hca_unbound_modules:
    description: Modules for an NVIDIA/Mellanox adapter no driver is bound to yet.
    type: list
    elements: str
    default: []
  softdeps:
    description: "modprobe.d softdep entries: C([{module, pre: [names], post: [names]}])."
    type: list
    elements: raw
    default: []
  runtime_load:
    description: Load modules now as well as persisting them; null detects whether this host allows it.
    type: bool
  peermem_force:
    description: Persist nvidia_peermem even when it did not load here (or could not be tried).
    type: bool
    default: false
  acs_clear:
    description:
      - Clear ACS Request/Completion Redirect on the bridges between GPUs and RDMA NICs now and at every boot
        (C(gpucluster-acs-clear.service) running C(/usr/local/lib/gpucluster-fabric/gpucluster_fabric_acs/pcie.py));
        off, both are removed.
      - Refused, before any change, where GPUDirect RDMA is off or the host has no GPU and RDMA NIC.
    type: bool
    default: false
  kallsyms:
    description: Read C(/proc/kallsyms) for the PeerDirect symbol.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Apply the RDMA kernel modules and GPUDirect RDMA
  gpucluster.fabric.rdma_modules:
    host: "{{ inventory_hostname }}"
    header: "{{ ansible_managed | default('Ansible managed') | comment }}"
    core_modules: [ib_core, ib_uverbs, ib_umad, rdma_ucm]
    interfaces: "{{ fabric_interfaces }}"
  register: rdma
"""

RETURN = r"""
gpudirect:
  description: GPUDirect RDMA as set up here, C({mode, reason}).
  returned: always
  type: dict
  sample: {mode: dmabuf, reason: "DMA-BUF: kernel 6.1.0-18-amd64 >= 5.12, ..."}
mode:
  description:
    - The GPUDirect RDMA mode set up (V(dmabuf), V(peermem) or V(none)); role rdma_modules registers the result as
      the fact C(gpucluster_gpudirect).
  returned: when applied
  type: str
reason:
  description: Why that mode.
  returned: when applied
  type: str
wanted:
  description: Every module the host loads at boot, in load order, C(-) spelled C(_).
  returned: always
  type: list
  elements: str
acs:
  description:
    - ACS clearing (O(acs_clear)) - C(clear), C(unit) and C(bridges), each C({address, before, after}) ACS Control
      values of a bridge cleared now (in check mode, to be cleared).
  returned: when applied
  type: dict
runtime_load:
  description: Whether the modules are loaded now (C(load)), and why (C(why)).
  returned: always
  type: dict
changes:
  description: What was changed (or, in check mode, would be), each with why.
  returned: always
  type: list
  elements: dict
  sample: [{what: "/etc/modules-load.d/gpucluster-rdma.conf", why: "its content differs"}]
facts:
  description: What was read to decide GPUDirect RDMA (as M(gpucluster.fabric.gpudirect_facts) returns it).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.rdma_modules import ARGUMENT_SPEC, run  # noqa: E402


def main():
    run(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True))


if __name__ == "__main__":
    main()
