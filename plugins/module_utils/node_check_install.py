# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Module node_check: put the node check (node_check.py) on the node, with its configuration, a systemd service and
timer, each file only where it differs, and the timer enabled (or not) as asked.

The code installed is the code this module was shipped with: node_check.py and every module it imports (relative
imports only: the standard library otherwise), in the node's one library (module_utils/node_library.py), so the node
runs the very rules the collection provisions with. Python 3.8 targets.
"""

import json
import sys

from . import node_check, node_library
from .applier import ARGUMENT_SPEC as APPLIER_ARGUMENTS
from .applier import Applier

PACKAGE = "gpucluster_fabric_check"
COMMAND = "/usr/local/sbin/gpucluster-fabric-check"
UNIT = "gpucluster-fabric-check"
SERVICE_FILE = f"/etc/systemd/system/{UNIT}.service"
TIMER_FILE = f"/etc/systemd/system/{UNIT}.timer"
MIN_INTERVAL = 10
MAX_INTERVAL = 86400

# Module node_check's options (documented in plugins/modules/node_check.py).
ARGUMENT_SPEC = {
    **APPLIER_ARGUMENTS,
    "interval": {"type": "int", "default": 300},
    "timer": {"type": "bool", "default": True},
    "only": {"type": "list", "elements": "str", "default": []},
    "skip": {"type": "list", "elements": "str", "default": []},
    "textfile_dir": {"type": "path", "default": node_check.TEXTFILE_DIR},
    "report": {"type": "path", "default": node_check.REPORT_PATH},
    "slurm": {"type": "bool", "default": False},
    "slurm_node": {"type": "str", "default": ""},
    "slurm_drain_after": {"type": "int", "default": node_check.CONFIG_DEFAULTS["slurm_drain_after"]},
    "slurm_resume_after": {"type": "int", "default": node_check.CONFIG_DEFAULTS["slurm_resume_after"]},
    "slurm_max_drained": {"type": "float", "default": node_check.CONFIG_DEFAULTS["slurm_max_drained"]},
}


def input_errors(interval, timer, only, skip, slurm=None):
    """The problems of the node check's settings, each naming the variable and the fix; ``slurm``: the hysteresis and
    breaker settings ({slurm_drain_after, slurm_resume_after, slurm_max_drained})."""
    errors = []
    for key, value in sorted((slurm or {}).items()):
        whole = key != "slurm_max_drained"
        if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)) or not 0 < value <= 1000:
            errors.append(
                f"node_check_{key}={value!r} is not "
                + (
                    "a number of runs from 1 to 1000; e.g. 2"
                    if whole
                    else "a share below 1 (0.1: a tenth of the partition) or a count of nodes from 1 on; e.g. 0.1"
                )
            )
    if isinstance(interval, bool) or not isinstance(interval, int) or not MIN_INTERVAL <= interval <= MAX_INTERVAL:
        errors.append(
            f"node_check_interval={interval!r} is not a number of seconds from {MIN_INTERVAL} to {MAX_INTERVAL}; "
            "set how often the timer checks the node, e.g. 300"
        )
    if not isinstance(timer, bool):
        errors.append(f"node_check_timer={timer!r} is not a boolean; set true (check on a timer) or false")
    for variable, patterns in (("node_check_only", only), ("node_check_skip", skip)):
        if not isinstance(patterns, (list, tuple)):
            errors.append(f"{variable}={patterns!r} is not a list of check names; list them, e.g. [port.rate]")
        else:
            errors.extend(node_check.pattern_errors(patterns, variable))
    return errors


# The settings input_errors judges, naming the variable and the fix: the validator's own message about them is left
# out (it would say the same twice, in the module's words).
JUDGED = ("interval", "timer", "only", "skip", "slurm_drain_after", "slurm_resume_after", "slurm_max_drained")


def checked_settings(arguments):
    """(settings, errors): the node check's settings as module node_check receives them (ArgumentSpecValidator with
    ARGUMENT_SPEC: defaulted and typed; a list given as a comma-separated string is split and stripped) and every
    problem with them. The one check of these settings: the site preflight and module fabric_intent call it."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    validated = ArgumentSpecValidator(ARGUMENT_SPEC).validate(dict(arguments))
    checked = dict(validated.validated_parameters)
    for name in ("only", "skip"):
        if isinstance(checked.get(name), list):
            checked[name] = [p.strip() if isinstance(p, str) else p for p in checked[name]]
    errors = [
        f"node_check: {message}"
        for message in validated.error_messages
        if not any(message.startswith(f"argument '{name}' ") for name in JUDGED)
    ]
    slurm = {key: checked[key] for key in ("slurm_drain_after", "slurm_resume_after", "slurm_max_drained")}
    judged = input_errors(checked["interval"], checked["timer"], checked["only"], checked["skip"], slurm)
    return checked, errors + judged


def package_sources():
    """{file path: source} of node_check.py and every module it imports, transitively (node_library.sources)."""
    return node_library.sources(node_check)


def launcher(python):
    return (
        f"#!{python}\n"
        '"""The fabric check of this node (gpucluster.fabric): the intent in /etc/gpucluster/fabric.json against the\n'
        'live state. Installed by role gpucluster.fabric.node_check; `gpucluster-fabric-check --help`."""\n'
        "import sys\n\n"
        f"sys.path.insert(0, {node_library.LIBRARY!r})\n"
        f"from {PACKAGE}.node_check import main  # noqa: E402\n\n"
        "sys.exit(main())\n"
    )


def service(header):
    return (
        f"{header}\n"
        "[Unit]\n"
        "Description=gpucluster.fabric node check (the fabric against /etc/gpucluster/fabric.json)\n"
        "After=network-online.target\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        f"ExecStart={COMMAND}\n"
        "# 1: a check failed (the metrics and the report say which); the unit fails when it could not check (2) or\n"
        "# broke (3).\n"
        "SuccessExitStatus=1\n"
        "# A backstop: the check bounds itself (its lock wait, its deadline, each command) well inside this.\n"
        f"TimeoutStartSec={node_check.UNIT_TIMEOUT}\n"
        "Nice=10\n"
        "IOSchedulingClass=idle\n"
    )


def timer(header, interval):
    return (
        f"{header}\n"
        "[Unit]\n"
        "Description=gpucluster.fabric node check, every "
        f"{interval} s\n\n"
        "[Timer]\n"
        f"OnBootSec={interval}\n"
        f"OnUnitActiveSec={interval}\n"
        "AccuracySec=1s\n"
        "# Spread over the fleet: nodes that booted together do not all ask the subnet manager in the same second.\n"
        f"RandomizedDelaySec={max(1, interval // 10)}\n\n"
        "[Install]\n"
        "WantedBy=timers.target\n"
    )


def config(params):
    keys = ("only", "skip", "textfile_dir", "report", "slurm", "slurm_node", "interval")
    keys += ("slurm_drain_after", "slurm_resume_after", "slurm_max_drained")
    return json.dumps({key: params[key] for key in keys}, indent=2, sort_keys=True) + "\n"


def run(module):
    """Module node_check: the code, its configuration and units where they differ; the timer as asked."""
    params, errors = checked_settings(module.params)
    apply = Applier(module)
    apply.refuse(errors)
    result = {"command": COMMAND, "unit": f"{UNIT}.timer"}
    if params["state"] == "checked":
        module.exit_json(changed=False, changes=[], **result)
    result.update(install(module, apply, params))
    module.exit_json(**apply.report(result))


def install(module, apply, params):
    """The node check on the host, each file only where it differs, with ``apply`` (the caller's Applier: module
    node_check's, or module fabric_intent's, which installs it with the intent in the same call); ``params``:
    ARGUMENT_SPEC's options, validated. Returns what it installed."""
    wanted = node_library.ship(apply, PACKAGE, [node_check], "gpucluster.fabric's node check (module node_check).")
    apply.file(COMMAND, launcher(sys.executable), mode=0o755)
    apply.file(node_check.CONFIG_PATH, config(params), mode=0o600)
    units_before = len(apply.changes)
    apply.file(SERVICE_FILE, service(params["header"]))
    apply.file(TIMER_FILE, timer(params["header"], params["interval"]))
    units_changed = len(apply.changes) > units_before
    if params["root"] == "/":
        _timer(module, apply, units_changed, params["timer"])
    return {"command": COMMAND, "unit": f"{UNIT}.timer", "files": wanted}


def _timer(module, apply, units_changed, wanted):
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        apply.changes.append({"what": f"{UNIT}.timer", "why": "no systemctl on this host: the timer cannot run"})
        module.fail_json(
            msg=f"{UNIT}.timer: no systemctl on this host; set node_check_timer: false", **apply.report({})
        )
    if units_changed:
        apply.changes.append({"what": "systemd", "why": f"daemon-reload, to read {SERVICE_FILE} and {TIMER_FILE}"})
        if not module.check_mode:
            module.run_command([systemctl, "daemon-reload"], check_rc=True)
    enabled = module.run_command([systemctl, "is-enabled", f"{UNIT}.timer"])[0] == 0
    active = module.run_command([systemctl, "is-active", f"{UNIT}.timer"])[0] == 0
    if wanted and not (enabled and active):
        apply.changes.append({"what": f"{UNIT}.timer", "why": "not enabled and started"})
        if not module.check_mode:
            module.run_command([systemctl, "enable", "--now", f"{UNIT}.timer"], check_rc=True)
    elif wanted and units_changed:
        apply.changes.append({"what": f"{UNIT}.timer", "why": "restarted, to follow the new interval"})
        if not module.check_mode:
            module.run_command([systemctl, "restart", f"{UNIT}.timer"], check_rc=True)
    elif not wanted and (enabled or active):
        apply.changes.append({"what": f"{UNIT}.timer", "why": "node_check_timer is false"})
        if not module.check_mode:
            module.run_command([systemctl, "disable", "--now", f"{UNIT}.timer"], check_rc=True)
