#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: rdma_core
short_description: Check role rdma_core's input and set the locked-memory limits RDMA needs, changing only what differs
description:
  - Checks the input of role C(gpucluster.fabric.rdma_core) (OS family, memlock, package and unit names), every
    problem at once, before any change.
  - Then writes the memlock limit of login sessions (C(/etc/security/limits.d/90-gpucluster-rdma-memlock.conf)) and
    of services (C(/etc/systemd/system.conf.d/90-gpucluster-rdma-memlock.conf)), or removes each where it is turned
    off, and re-executes systemd (C(systemctl daemon-reexec), which restarts no service) when the services' limit
    changed.
  - Also says whether apt has package indexes yet (RV(apt_indexes)) and which of O(packages) are not installed
    (RV(packages_missing)), so the role refreshes the indexes and runs apt only when there is something to install.
  - Only what differs from the live state is changed, each change returned with its reason (RV(changes)).
version_added: 0.2.0
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.posix
  - gpucluster.fabric.applier
options:
  os_family:
    description: The host's C(ansible_facts.os_family).
    type: str
    required: true
  distribution:
    description: The host's C(ansible_facts.distribution), for the message.
    type: str
    default: ""
  supported_families:
    description: The OS families the role supports.
    type: list
    elements: str
    default: [Debian]
  memlock:
    description: The locked-memory limit in KiB, or V(unlimited).
    type: str
    default: unlimited
  memlock_pam:
    description: Set the limit of login sessions (pam_limits).
    type: bool
    default: true
  memlock_systemd:
    description: Set systemd's default limit of services.
    type: bool
    default: true
  extra_packages:
    description: Further packages the role installs (their names are checked).
    type: list
    elements: raw
    default: []
  services:
    description: Units the role enables and starts (their names are checked).
    type: list
    elements: raw
    default: []
  packages:
    description:
      - Every package the role installs; those dpkg does not list as installed are returned in RV(packages_missing),
        so that the role calls apt only when there is something to install.
    type: list
    elements: raw
    default: []
"""

EXAMPLES = r"""
- name: Check the input and set the memlock limits
  gpucluster.fabric.rdma_core:
    host: "{{ inventory_hostname }}"
    header: "{{ ansible_managed | default('Ansible managed') | comment }}"
    os_family: "{{ ansible_facts.os_family }}"
    memlock: unlimited
"""

RETURN = r"""
changes:
  description: What was changed (or, in check mode, would be), each with why.
  returned: always
  type: list
  elements: dict
  sample: [{what: /etc/security/limits.d/90-gpucluster-rdma-memlock.conf, why: it is missing}]
apt_indexes:
  description: Whether C(/var/lib/apt/lists) holds package indexes already.
  returned: always
  type: bool
packages_missing:
  description: The names of O(packages) that dpkg does not list as installed (or that only apt can judge).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.rdma_core import ARGUMENT_SPEC, run  # noqa: E402


def main():
    run(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True))


if __name__ == "__main__":
    main()
