# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Module roce_qos on the node (and its step of module apply): apply each RoCE interface's QoS now with
roce_qos_apply.py, the code the boot-time unit runs too, and install that unit, each file only where it differs.
Python 3.8 targets."""

from . import node_library, roce_qos_apply, roce_qos_boot
from . import roce_qos as rules
from .applier import Applier
from .roce_qos_apply import CHANGED, SETTINGS, UNSUPPORTED, Host, QosError, apply_all, module_runner

# Module roce_qos' options (documented in plugins/modules/roce_qos.py).
ARGUMENT_SPEC = {
    "interfaces": {"type": "dict", "required": True},
    "require_pfc": {"type": "bool", "default": False},
    "warn_unsupported": {"type": "bool", "default": True},
    "sysfs_root": {"type": "path", "default": "/"},
    "configfs_root": {"type": "path", "default": "/sys/kernel/config"},
    "persist": {"type": "bool", "default": False},
    "boot_wait_seconds": {"type": "int", "default": 120},
    "header": {"type": "str", "default": ""},
    "root": {"type": "path", "default": "/"},
}


def _no_pfc(results):
    return [name for name, result in results.items() if result["pfc"]["state"] == UNSUPPORTED]


def asked(args):
    """What was asked, beside the result (``settings``, ``require_pfc``): role roce_qos registers the result as the
    fact gpucluster_roce_qos, which fabric_validate reads the live QoS back against."""
    return {"settings": args.get("interfaces") or {}, "require_pfc": args.get("require_pfc") is True}


def nothing_to_apply(args):
    """The result when the host has no RoCE interface (the module is then not run), else None."""
    if args.get("interfaces"):
        return None
    nothing = {"changed": False, "interfaces": {}, "unsupported": [], "msg": "no RoCE interface: nothing to apply"}
    return {**nothing, **asked(args)}


def run(module):
    """Module roce_qos: every setting read and compared, then written where it differs (none when PFC is required and
    a NIC cannot take it); with ``persist``, what re-applies them at boot."""
    nothing = nothing_to_apply(module.params)
    if nothing is not None:
        module.exit_json(**nothing)
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
            **asked(module.params),
        )
    changes, diff = persist(module) if module.params["persist"] and module.params["interfaces"] else ([], [])
    result = {"changed": changed or bool(changes), "interfaces": results, "unsupported": unsupported}
    result.update(asked(module.params))
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
    node_library.ship(apply, rules.PACKAGE, [roce_qos_boot, roce_qos_apply], "Role roce_qos' settings at boot.")
    node_library.remove_legacy(apply, ["roce_qos_apply.py", "roce_qos_boot.py"])
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
