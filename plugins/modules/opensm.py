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
version_added: 0.1.0
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
    description: The content of C(opensm.conf), keys included; never logged or shown.
    type: str
    required: true
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
    partitions: "{{ lookup('ansible.builtin.template', 'partitions.conf.j2') }}"
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
from ansible_collections.gpucluster.fabric.plugins.module_utils import dpkg  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.applier import ARGUMENT_SPEC as APPLIER_ARGUMENTS  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.applier import Applier  # noqa: E402


def unit_state(module, unit):
    """(was_running, main PID) from `systemctl show`; a tree (tests) or a host without systemctl runs nothing."""
    systemctl = module.get_bin_path("systemctl") if module.params["root"] == "/" else None
    if not systemctl:
        return False, 0
    _rc, out, _err = module.run_command(
        [systemctl, "show", "--property=ActiveState", "--property=MainPID", unit], environ_update={"LC_ALL": "C"}
    )
    fields = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    pid = int(fields.get("MainPID") or 0) if (fields.get("MainPID") or "0").isdigit() else 0
    return fields.get("ActiveState") == "active" and pid > 0, pid


def main():
    module = AnsibleModule(
        argument_spec={
            **APPLIER_ARGUMENTS,
            "unit": {"type": "str", "required": True},
            "directories": {"type": "list", "elements": "path", "default": []},
            "partitions_file": {"type": "path", "required": True},
            "partitions": {"type": "str", "required": True},
            "conf_file": {"type": "path", "required": True},
            "conf": {"type": "str", "required": True, "no_log": True},
            "defaults_file": {"type": "path", "required": True},
            "defaults": {"type": "str", "required": True},
            "dropin_file": {"type": "path", "required": True},
            "dropin": {"type": "str", "required": True},
            "packages": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    params = module.params
    apply = Applier(module)
    was_running, pid = unit_state(module, params["unit"])
    packages = dpkg.apt_state(apply.path, params["packages"])
    if params["state"] == "checked":  # read only
        module.exit_json(changed=False, changes=[], was_running=was_running, pid_before=pid, **packages)
    for directory in params["directories"]:
        apply.directory(directory)

    def changed_by(write):
        before = len(apply.changes)
        write()
        return len(apply.changes) > before

    partitions = changed_by(lambda: apply.file(params["partitions_file"], params["partitions"]))
    conf = changed_by(lambda: apply.file(params["conf_file"], params["conf"], mode=0o600, secret=True))
    defaults = changed_by(lambda: apply.file(params["defaults_file"], params["defaults"]))
    dropin = changed_by(lambda: apply.file(params["dropin_file"], params["dropin"]))
    result = {
        "was_running": was_running,
        "pid_before": pid,
        "partitions_changed": partitions,
        "config_changed": conf or defaults or dropin,
        "dropin_changed": dropin,
        **packages,
    }
    module.exit_json(**apply.report(result))


if __name__ == "__main__":
    main()
