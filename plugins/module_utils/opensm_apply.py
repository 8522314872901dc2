# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Module opensm's applier (documented in plugins/modules/opensm.py): role opensm's files where they differ, and what
the running subnet manager must do about it. The node check runs the same code in check mode (concerns.appliers()),
without ``conf``: opensm.conf holds the keys, which the intent never holds, so there only its presence and its mode
are compared. Standard library only (Python 3.8 targets).
"""

import os

from . import dpkg
from .applier import ARGUMENT_SPEC as APPLIER_ARGUMENTS
from .applier import Applier

CONF_MODE = 0o600  # opensm.conf holds the keys

ARGUMENT_SPEC = {
    **APPLIER_ARGUMENTS,
    "unit": {"type": "str", "required": True},
    "directories": {"type": "list", "elements": "path", "default": []},
    "partitions_file": {"type": "path", "required": True},
    "partitions": {"type": "str", "required": True},
    "conf_file": {"type": "path", "required": True},
    "conf": {"type": "str", "no_log": True},
    "defaults_file": {"type": "path", "required": True},
    "defaults": {"type": "str", "required": True},
    "dropin_file": {"type": "path", "required": True},
    "dropin": {"type": "str", "required": True},
    "packages": {"type": "list", "elements": "str", "default": []},
}


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


def keys_file(module, apply, path):
    """Without ``conf``: opensm.conf must exist, root's only; its content is left as it is (the keys are not known
    here). A wrong mode is put back; a missing file cannot be written without its content."""
    real = apply.path(path)
    try:
        mode = os.stat(real).st_mode & 0o7777
    except FileNotFoundError:
        apply.changes.append({"what": path, "why": "it is missing (its content holds the keys: give conf to write it)"})
        if not module.check_mode:
            module.fail_json(msg=f"{path} is missing and no conf was given to write it", **apply.report({}))
        return
    if mode != CONF_MODE:
        apply.changes.append({"what": path, "why": f"mode {mode:04o}, not {CONF_MODE:04o} (it holds the keys)"})
        if not module.check_mode:
            os.chmod(real, CONF_MODE)


def run(module):
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
    if params["conf"] is None:
        conf = changed_by(lambda: keys_file(module, apply, params["conf_file"]))
    else:
        conf = changed_by(lambda: apply.file(params["conf_file"], params["conf"], mode=CONF_MODE, secret=True))
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
