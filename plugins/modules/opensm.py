#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: opensm
short_description: Write OpenSM's files where they differ and say what the running subnet manager must do about it
description:
  - The configure step of role C(gpucluster.fabric.opensm) in one call. Reads the state of the OpenSM unit (whether
    it runs, and its main PID), creates the configuration and unit drop-in directories where they are missing, and
    writes C(partitions.conf), C(opensm.conf) (mode C(0600), it holds the keys), the service defaults and the unit
    drop-in, each only where its content or mode differs.
  - Restarts and signals nothing itself. It returns what changed by kind (RV(partitions_changed),
    RV(config_changed), RV(dropin_changed)) and what ran before (RV(was_running), RV(pid_before)), so that the role's
    handlers reload partitions with C(SIGHUP) or restart OpenSM only where that is what changed, and only with
    C(opensm_restart_ok).
  - Also says which of O(packages) are not installed yet (RV(packages_missing)), so that the role runs apt only then.
  - The content of C(opensm.conf) is never shown, in the diff or elsewhere.
version_added: 0.2.0
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.posix
  - gpucluster.fabric.applier
options:
  unit:
    description: The OpenSM unit whose state is read (C(opensm@<GUID>.service) on Debian).
    type: str
    required: true
  directories:
    description: Directories created (mode C(0755)) where they are missing, before the files.
    type: list
    elements: path
    default: []
  partitions_file:
    description: Where C(partitions.conf) goes.
    type: path
    required: true
  partitions:
    description: The content of C(partitions.conf).
    type: str
    required: true
  conf_file:
    description: Where C(opensm.conf) goes (mode C(0600)).
    type: path
    required: true
  conf:
    description:
      - The content of C(opensm.conf), keys included; never logged or shown.
      - Without it, C(opensm.conf) must exist; only its mode is put back to C(0600) (the node check compares it this
        way, in check mode, as the host's intent never holds the keys). A missing file then fails.
    type: str
  defaults_file:
    description: Where the service defaults (the bound port) go.
    type: path
    required: true
  defaults:
    description: The content of the service defaults.
    type: str
    required: true
  dropin_file:
    description: Where the unit drop-in goes.
    type: path
    required: true
  dropin:
    description: The content of the unit drop-in.
    type: str
    required: true
  packages:
    description: The packages the role installs; those dpkg does not list as installed are in RV(packages_missing).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details: The diff of C(opensm.conf) shows that it changes, never its content.
"""

EXAMPLES = r"""
- name: Write OpenSM's files where they differ
  gpucluster.fabric.opensm:
    unit: opensm@0x0002c90300000001.service
    directories: [/etc/opensm, /etc/systemd/system/opensm@.service.d]
    partitions_file: /etc/opensm/partitions.conf
    partitions: "{{ opensm_partitions | gpucluster.fabric.opensm_partitions_conf(hostvars, groups) }}"
    conf_file: /etc/opensm/opensm.conf
    conf: "{{ lookup('ansible.builtin.template', 'opensm.conf.j2') }}"
    defaults_file: /etc/default/opensm
    defaults: "{{ lookup('ansible.builtin.template', 'default-opensm.j2') }}"
    dropin_file: /etc/systemd/system/opensm@.service.d/gpucluster-fabric.conf
    dropin: "{{ lookup('ansible.builtin.template', 'opensm-unit.conf.j2') }}"
  register: opensm_configured
"""

RETURN = r"""
changes:
  description: What was changed (or, in check mode, would be), each with why.
  returned: always
  type: list
  elements: dict
was_running:
  description: Whether the unit was active with a main process before this call.
  returned: always
  type: bool
pid_before:
  description: The unit's main PID before this call (C(0) when it does not run).
  returned: always
  type: int
partitions_changed:
  description: Whether C(partitions.conf) changed (a running OpenSM is to re-read it on C(SIGHUP)).
  returned: always
  type: bool
config_changed:
  description: Whether C(opensm.conf), the service defaults or the unit drop-in changed (a running OpenSM keeps its old
    settings until restarted).
  returned: always
  type: bool
dropin_changed:
  description: Whether the unit drop-in changed (systemd is to reload its units).
  returned: always
  type: bool
packages_missing:
  description: The names of O(packages) that dpkg does not list as installed (the role runs apt only for those).
  returned: always
  type: list
  elements: str
apt_indexes:
  description: Whether C(/var/lib/apt/lists) holds package indexes already.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.opensm_apply import ARGUMENT_SPEC, run  # noqa: E402


def main():
    run(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True))


if __name__ == "__main__":
    main()
