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
        this module runs (C(/usr/local/libexec/gpucluster/roce_qos_apply.py)) with its entry point O(boot_script)
        beside it, the settings C(/etc/gpucluster/roce_qos.json), the enabled oneshot unit
        C(gpucluster-roce-qos.service) and the udev rule C(/etc/udev/rules.d/90-gpucluster-roce-qos.rules) - and
        reloading systemd or udev only when their file changed.
    type: bool
    default: false
  boot_script:
    description:
      - The entry point the unit runs (role roce_qos passes its C(files/roce_qos_boot.py)); required with O(persist).
    type: str
    default: ""
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
  - gpucluster.fabric.role_checks
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
  description: O(interfaces) as asked (added by the action plugin; role roce_qos registers the result as the fact
    C(gpucluster_roce_qos)).
  returned: always
  type: dict
require_pfc:
  description: O(require_pfc) as asked (added by the action plugin).
  returned: always
  type: bool
changes:
  description: What O(persist) changed (or, in check mode, would), each with why.
  returned: always
  type: list
  elements: dict
"""

import inspect  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils import roce_qos as rules  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils import roce_qos_apply  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.applier import Applier  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.roce_qos_apply import (  # noqa: E402
    CHANGED,
    SETTINGS,
    UNSUPPORTED,
    Host,
    QosError,
    apply_all,
    module_runner,
)


def _no_pfc(results):
    return [name for name, result in results.items() if result["pfc"]["state"] == UNSUPPORTED]


def main():
    module = AnsibleModule(
        argument_spec={
            "role_checks": {"type": "bool", "default": False},  # the action plugin's (controller side)
            "interfaces": {"type": "dict", "required": True},
            "require_pfc": {"type": "bool", "default": False},
            "warn_unsupported": {"type": "bool", "default": True},
            "sysfs_root": {"type": "path", "default": "/"},
            "configfs_root": {"type": "path", "default": "/sys/kernel/config"},
            "persist": {"type": "bool", "default": False},
            "boot_script": {"type": "str", "default": ""},
            "boot_wait_seconds": {"type": "int", "default": 120},
            "header": {"type": "str", "default": ""},
            "root": {"type": "path", "default": "/"},
        },
        required_if=[("persist", True, ("boot_script",))],
        supports_check_mode=True,
    )

    run = module_runner(module)

    def apply(check_mode):
        host = Host(module.params["sysfs_root"], module.params["configfs_root"], run, check_mode)
        try:
            return apply_all(host, module.params["interfaces"])
        except QosError as exc:
            module.fail_json(msg=str(exc))
        except OSError as exc:
            module.fail_json(msg=f"{exc.filename}: {exc.strerror}")

    # With require_pfc, a host whose NICs cannot take PFC fails before anything is written (nothing half-applied).
    results = apply(True)
    if not module.check_mode and not (module.params["require_pfc"] and _no_pfc(results)):
        results = apply(False)
    unsupported = [
        f"{name} {setting}: {result[setting]['reason']}"
        for name, result in results.items()
        for setting in SETTINGS
        if result[setting]["state"] == UNSUPPORTED
    ]
    for line in unsupported if module.params["warn_unsupported"] else []:
        module.warn(f"not applied: {line}")
    changed = any(result[setting]["state"] == CHANGED for result in results.values() for setting in SETTINGS)
    no_pfc = _no_pfc(results)
    if module.params["require_pfc"] and no_pfc:
        module.fail_json(
            msg=f"PFC cannot be set on {', '.join(no_pfc)} and roce_qos_require_pfc is true, so nothing was changed: "
            + "; ".join(line for line in unsupported if " pfc: " in line),
            interfaces=results,
            unsupported=unsupported,
            changed=False,
        )
    changes, diff = persist(module) if module.params["persist"] and module.params["interfaces"] else ([], [])
    result = {"changed": changed or bool(changes), "interfaces": results, "unsupported": unsupported}
    result["changes"] = changes
    if module._diff:
        result["diff"] = diff
    module.exit_json(**result)


def persist(module):
    """The boot-time files, each written only where it differs; systemd and udev reloaded only for what changed."""
    params = module.params
    interfaces, header = params["interfaces"], params["header"]
    apply = Applier(module, params["root"])
    # the very code this module runs, as it was shipped to the host with the module
    apply.file(rules.APPLY_CODE, inspect.getsource(roce_qos_apply))
    apply.file(rules.BOOT_SCRIPT, params["boot_script"].rstrip("\n") + "\n")
    apply.file(rules.CONFIG, rules.boot_config(interfaces))
    unit_before = len(apply.changes)
    apply.file(rules.UNIT_FILE, rules.boot_unit(header, interfaces, params["boot_wait_seconds"]))
    unit_changed = len(apply.changes) > unit_before
    rule_before = len(apply.changes)
    apply.file(rules.UDEV_RULE, rules.udev_rule(header))
    rule_changed = len(apply.changes) > rule_before
    if params["root"] != "/":
        return apply.changes, apply.diff
    systemctl = module.get_bin_path("systemctl", required=True)
    if unit_changed:
        apply.changes.append({"what": "systemd", "why": "daemon-reload, to read " + rules.UNIT_FILE})
        if not module.check_mode:
            module.run_command([systemctl, "daemon-reload"], check_rc=True)
    # Enabled, not started: the settings were applied above already.
    rc, _out, _err = module.run_command([systemctl, "is-enabled", rules.UNIT])
    if rc != 0:
        apply.changes.append({"what": rules.UNIT, "why": "not enabled"})
        if not module.check_mode:
            module.run_command([systemctl, "enable", rules.UNIT], check_rc=True)
    if rule_changed:
        apply.changes.append({"what": "udev", "why": "control --reload, to read " + rules.UDEV_RULE})
        udevadm = module.get_bin_path("udevadm")
        if udevadm and not module.check_mode:
            module.run_command([udevadm, "control", "--reload"])  # as before: a container may have no udevd
    return apply.changes, apply.diff


if __name__ == "__main__":
    main()
