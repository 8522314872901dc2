# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The node checks itself: the host's intent (/etc/gpucluster/fabric.json, written by site.yml) against its live state,
with the rules that provisioned it, on the node, without Ansible.

Two kinds of check, each a check record as report.json has them (host, tier, check, status, measured, threshold,
unit, message):

- drift: each role's applier (the code module apply runs, concerns.appliers()) run in check mode with the intent's
  arguments: ``drift.<role>`` passes when it would change nothing, and fails naming what it would change and why;
- health: the validation report's health tier (fabric_checks.health_checks) on what fabric_collect reads here.

It writes the checks as JSON, as Prometheus metrics for node_exporter's textfile collector (atomically, with the time
of the run) and a one-line reason, and exits 0 (no check failed), 1 (a check failed) or 2 (it could not check: no
intent, or an unusable configuration). Module node_check installs this module and the ones it imports (relative
imports only: standard library, Python 3.8 and later) on the node; the systemd timer and Slurm run it there.
"""

import concurrent.futures
import contextlib
import decimal
import fnmatch
import ipaddress
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import traceback

from . import intent as intent_file
from .concerns import appliers, part_spec
from .converge_hold import HOLD_PATH, read_hold
from .fabric_checks import (
    PENDING_REBOOT,
    collected_record,
    expected_interface_mtus,
    firmware_checks,
    health_checks,
    sm_verdict,
    with_sm,
)
from .fabric_checks import check as _check
from .fabric_checks.isolation import isolation_checks
from .fabric_collect import ARGUMENT_SPEC as COLLECT_SPEC
from .fabric_collect import CollectError, collect
from .fabric_isolation import parse_ca_ports, parse_pkey_table, port_guid
from .host_checks import StepDone, StepModule
from .sminfo import sminfo_outcome

CONFIG_PATH = "/etc/gpucluster/fabric-check.json"
REPORT_PATH = "/var/lib/gpucluster/fabric-check.json"
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
METRICS_FILE = "gpucluster_fabric.prom"
TIER = "health"
SCHEMA = 1
# The collection's version (galaxy.yml's; tests/repo/test_release_metadata.py keeps the two equal): --version and
# gpucluster_fabric_check_info say which check runs on the node.
COLLECTION_VERSION = "0.2.0"
# "error": the check itself broke (a bug or an input it could not read), never a node fault and never a pass.
STATES = ("passed", "failed", "skipped", "error")
# The appliers the drift checks run (the registry's), and the families of check names, for the allow and deny lists
# (node_check_only, node_check_skip): a name is its family, or its family and a subject in brackets
# (port.state[mlx5_0/1]).
APPLIERS = appliers()
DRIFT_ROLES = tuple(sorted(name.rsplit(".", 1)[-1] for name in APPLIERS))
FAMILIES = (
    *(f"drift.{role}" for role in DRIFT_ROLES),
    "rdma.device",
    "port.state",
    "port.rate",
    "port.active_mtu",
    "module",
    "gpu.nic_affinity",
    "gpudirect",
    "nccl.conf",
    "roce_qos",
    "roce_qos.pfc",
    "roce_qos.dscp_map",
    "roce_qos.ecn",
    "roce_qos.tos",
    "sm.master",
    "sm.state",
    "opensm.running",
    "partition",
    "partition.port",
    "interface.mtu",
    "pcie.link",
    "iommu",
    "pcie.acs",
    "roce.gid",
    "hca.firmware",
    "intent",
    "tool.timeout",
    "deadline",
)
# What the node check reads with: ``sminfo`` under this timeout (seconds), never a wait for ports to settle.
SM_QUERY_TIMEOUT = 5
ISOLATION_WORKERS = 16  # smpquery processes at once on a subnet manager
# A port whose read was refused at once (a busy subnet manager or ibsim refusing a connection, a lost MAD) is read once
# more, fewer at a time; one that ran out of time is not, so a silent port costs its timeout once.
ISOLATION_RETRY_WORKERS = 4
SM_GOOD_STATES = ("SMINFO_MASTER", "SMINFO_STANDBY")  # of a subnet manager that takes part in the handover
CONFIG_DEFAULTS = {
    "textfile_dir": TEXTFILE_DIR,
    "report": REPORT_PATH,
    "only": [],
    "skip": [],
    # Drain the node in Slurm when a check fails, resume it when its checks pass again (slurm_decision).
    "slurm": False,
    "slurm_node": "",  # the node's name in Slurm: the short host name unless set
    "interval": 300,  # the timer's (node_check_interval): the hysteresis's span
    # Hysteresis and breaker (docs/health.md): drain after 2 failing runs that outlast an interval, resume after 2
    # clean runs, and no new drain while a tenth of the partition (at least one node) is drained by the check.
    "slurm_drain_after": 2,
    "slurm_resume_after": 2,
    "slurm_max_drained": 0.1,
}
LOCK_PATH = "/run/gpucluster-fabric-check.lock"
# Bounds (seconds). Slurm kills a HealthCheckProgram that runs past 60 s (slurm.conf(5), HealthCheckProgram), and LBNL
# NHC bounds itself at 30 s: a run waits at most LOCK_WAIT for another run's lock, then stops starting work at
# RUN_DEADLINE (what is left is skipped, saying so), each command at most COMMAND_TIMEOUT (scontrol SLURM_TIMEOUT),
# so that the whole run, writes included, ends well inside Slurm's 60 s. The unit's TimeoutStartSec is the backstop.
COMMAND_TIMEOUT = 10
SLURM_TIMEOUT = 5
RUN_DEADLINE = 40
LOCK_WAIT = 10
UNIT_TIMEOUT = 60  # the oneshot unit's TimeoutStartSec: Slurm's bound too
# Exit statuses (also in --help): 0 every check passed or was skipped, 1 a check failed, 2 the node could not be
# checked (no usable intent or configuration, another run held the lock), 3 the check broke (a bug): 2 and 3 fail the
# systemd unit, which counts 1 as success.
EXIT_PASSED, EXIT_FAILED, EXIT_NOT_CHECKED, EXIT_BROKEN = 0, 1, 2, 3
# Where commands are found whatever PATH the caller gave: slurmd runs HealthCheckProgram with an environment of its
# own, and systemd with its default one.
SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


# --- the stand-in for AnsibleModule ----------------------------------------------------------------------------------


class NodeModule(StepModule):
    """The stand-in for AnsibleModule (host_checks.StepModule) without Ansible, in check mode only: what the appliers'
    code uses besides params, warn, exit_json and fail_json: run_command (bounded), get_bin_path. ``offline``: nothing
    is downloaded (cuda_repo_probe reads it)."""

    check_mode = True
    _diff = False
    offline = True

    def __init__(self, params):
        super().__init__(params)
        self.no_log_values = set()
        self.run_command_environ_update = {}

    def atomic_move(self, src, dest):
        raise RuntimeError("the node check changes nothing")

    @staticmethod
    def get_bin_path(arg, required=False, opt_dirs=None):
        dirs = [*(opt_dirs or []), *os.environ.get("PATH", "").split(os.pathsep), *SYSTEM_PATH]
        found = shutil.which(arg, path=os.pathsep.join(d for d in dirs if d))
        if found is None and required:
            raise StepDone({"failed": True, "msg": f"{arg} not found on the node"})
        return found

    # The run's deadline (time.monotonic()), which bounds every command; None: no deadline (a test, a module).
    deadline = None
    # Each command that ran out of time in this process: (tool, seconds), for the ``tool.timeout`` checks.
    timed_out = []

    def run_command(self, args, check_rc=False, environ_update=None, data=None, binary_data=False, cwd=None, **kwargs):
        """AnsibleModule.run_command's contract, bounded: at most ``timeout`` seconds (default COMMAND_TIMEOUT, and
        never past the run's deadline); a command that runs out of time is killed with its process group and
        returns 124, with a message naming it, and is recorded for the ``tool.timeout`` checks."""
        argv = shlex.split(args) if isinstance(args, str) else [str(arg) for arg in args]
        tool = os.path.basename(argv[0]) if argv else "?"
        env = dict(os.environ, LANG="C", LC_ALL="C", LC_MESSAGES="C")
        env.update(self.run_command_environ_update)
        env.update(environ_update or {})
        if data is not None and not binary_data:
            data += "\n"
        limit = float(kwargs.get("timeout") or COMMAND_TIMEOUT)
        if NodeModule.deadline is not None:
            left = NodeModule.deadline - time.monotonic()
            if left <= 0:
                return 124, "", f"{tool}: not run: the node check's deadline ({RUN_DEADLINE} s) has passed"
            limit = min(limit, left)
        try:
            # The node check runs on the node without Ansible (systemd's timer, Slurm): no AnsibleModule.run_command.
            process = subprocess.Popen(  # pylint: disable=ansible-bad-function
                argv,
                stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as exc:
            self.fail_json(msg=f"{argv[0]}: {exc.strerror}", rc=exc.errno or 2, cmd=argv)
        try:
            stdin = data.encode() if isinstance(data, str) else data
            out, err = process.communicate(stdin, timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            NodeModule.timed_out.append((tool, round(limit, 1)))
            return 124, "", f"{tool}: timed out after {limit:.0f} s (the node check's limit for one command)"
        out, err = (text.decode("utf-8", "replace") for text in (out, err))
        if check_rc and process.returncode != 0:
            self.fail_json(msg=err.strip() or f"{argv[0]} exited {process.returncode}", rc=process.returncode)
        return process.returncode, out, err


def _kill_group(process):
    """Kill a command that ran out of time and whatever it started (its own session), and reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()
    # A grandchild that left the session may still hold a pipe: the run goes on without its output.
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.communicate(timeout=5)


# --- arguments: the intent's, with the spec's defaults and types (what ArgumentSpecValidator gives the module) ----


# The types of an applier's options as ansible-core's ArgumentSpecValidator gives them to the module (its
# check_type_bool, check_type_int, check_type_float): the node check runs the appliers without Ansible, and must type
# the intent's arguments exactly as the module got them (tests/unit compares the two on every awkward value).
_TRUE = frozenset(("y", "yes", "on", "1", "true", "t"))
_FALSE = frozenset(("n", "no", "off", "0", "false", "f"))


def _boolean(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"{value!r} is not a boolean")


def _integer(value):
    if isinstance(value, int):
        return value
    try:
        number = decimal.Decimal(value)
        if number != int(number):
            raise ValueError("a decimal part")
        return int(number)
    except (decimal.DecimalException, TypeError, ValueError) as exc:
        raise ValueError(f"{value!r} is not a whole number") from exc


def _typed(kind, value):
    if value is None or kind in (None, "raw", "dict"):
        return value
    if kind == "bool":
        return _boolean(value)
    if kind == "int":
        return _integer(value)
    if kind == "float":
        return value if isinstance(value, float) else float(value)
    if kind == "path":
        return os.path.expanduser(os.path.expandvars(str(value)))
    if kind == "str":
        return value if isinstance(value, str) else str(value)
    if kind == "list":
        if isinstance(value, list):
            return value
        if isinstance(value, str):
            return value.split(",")
        if isinstance(value, (int, float)):
            return [str(value)]
        raise ValueError(f"{type(value).__name__} cannot be a list")
    return value


def params_for(spec, args):
    """``args`` as the module would receive them: every option of ``spec``, defaulted and of its type. Raises
    ValueError naming the option for an argument the spec does not have or a value of the wrong type."""
    unknown = sorted(set(args) - set(spec))
    if unknown:
        raise ValueError(
            f"arguments {', '.join(unknown)} are not options of the applier (an intent of another version)"
        )
    params = {}
    for name, option in spec.items():
        value = args.get(name, option.get("default"))
        try:
            value = _typed(option.get("type", "str"), value)
            if option.get("type") == "list" and value is not None and option.get("elements") not in (None, "raw"):
                value = [_typed(option["elements"], item) for item in value]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"option {name}: {exc}") from exc
        params[name] = value
    return params


# --- the checks ------------------------------------------------------------------------------------------------------


def _change_lines(role, result):
    """What the applier would change, one phrase each."""
    lines = [f"{change.get('what')}: {change.get('why')}" for change in result.get("changes") or []]
    # Packages the role's apt task installs after its applier (rdma_core, opensm): the applier says which are missing.
    lines += [f"package {name}: not installed" for name in result.get("packages_missing") or []]
    # nccl: the exact build installed and each package's hold, which the role's apt tasks set after its applier.
    if result.get("in_place") is False:
        installed = {name: (found or {}).get("version") for name, found in (result.get("installed") or {}).items()}
        lines.append(
            f"packages {', '.join(result.get('packages') or [])}: not at {result.get('package_version')}"
            f" (installed: {installed or 'none'})"
        )
    lines += [f"package {name}: hold differs" for name in result.get("hold_pending") or []]
    qos = result.get("interfaces") if role == "roce_qos" else None  # roce_qos: per interface and setting
    for interface, settings in sorted((qos or {}).items()):
        for setting, outcome in sorted(settings.items()):
            if isinstance(outcome, dict) and outcome.get("state") == "changed":
                lines.append(f"{interface} {setting}: {outcome.get('current')} -> {outcome.get('wanted')}")
    return lines


def drift_check(host, role, args, module_class=NodeModule):
    """(check record, the applier's result): ``drift.<role>``, from the role's applier in check mode."""
    name = f"drift.{role}"
    spec, run, *_rest = APPLIERS[f"gpucluster.fabric.{role}"]
    # A role whose intent holds more than its applier's arguments keeps those under ``applier`` (opensm: its unit
    # and diagnostics' environment beside what its task writes).
    arguments = dict((args or {}).get("applier", args or {}))
    # Arguments that leave the applier nothing to do (no interface, no setting named): site.yml does not run it, so
    # neither does the check (the concern's own rule, its code's nothing_to_apply).
    rule = getattr(sys.modules.get(run.__module__), "nothing_to_apply", None)
    nothing = rule(arguments) if rule is not None else None
    if nothing is not None:
        message = f"{role}: {nothing.get('msg') or 'nothing to apply'}"
        return _check(host, TIER, name, "passed", message, 0, 0, "changes"), nothing
    if "state" in spec:
        arguments["state"] = "present"
    try:
        module = module_class(params_for(spec, arguments))
        run(module)
        result = {"failed": True, "msg": "the applier returned without a result"}
    except StepDone as done:
        result = done.result
    except ValueError as exc:
        message = f"{role}: the intent's arguments cannot be checked: {exc}; run site.yml again to rewrite the intent"
        return _check(host, TIER, name, "error", message), {"failed": True, "msg": str(exc)}
    except Exception:  # noqa: BLE001 - one role's bug must not hide the others' checks
        said = traceback.format_exc().strip().splitlines()[-1]
        message = f"{role}: the check of its settings broke ({said}): not a verdict on the node; report it"
        return _check(host, TIER, name, "error", message), {"failed": True, "msg": said}
    if result.get("failed"):
        message = f"{role}: the check of its settings failed: {' '.join(str(result.get('msg')).split())}"
        return _check(host, TIER, name, "failed", message, "error", "no change"), result
    lines = _change_lines(role, result)
    if result.get("changed") or lines:
        message = (
            f"{role} differs from the intent: {'; '.join(lines) or 'a setting differs'}; run the collection again "
            f"(--tags {role}) to put it back, or change the inventory if the change is wanted"
        )
        return _check(host, TIER, name, "failed", message, len(lines) or 1, 0, "changes"), result
    return _check(host, TIER, name, "passed", f"{role} is as the intent says", 0, 0, "changes"), result


class Part(dict):
    """A part of the intent as the node reads it: every key of its spec, typed. Asking for a key the spec does not
    have is the node check's bug (a renamed argument), and raises KeyError rather than reading as unset."""

    def get(self, key, default=None):
        if key not in self:
            raise KeyError(f"the intent has no {key!r} here (known: {', '.join(sorted(self))})")
        return self[key]


def intent_part(roles, role):
    """``role``'s part of the intent as the node reads it: each key of the registry's ``part`` (concerns.part_spec)
    typed by its option, or, for a role without one, its applier's arguments typed and defaulted by the applier's
    spec; None where the host has no part for ``role``. Raises ValueError for a key missing, unknown or of the wrong
    type (an intent of another version): never a fallback default in place of what the intent should say."""
    part = roles.get(role)
    if part is None:
        return None
    if not isinstance(part, dict):
        raise ValueError(f"the intent's {role} part is not a mapping")
    spec = part_spec(role)
    if not spec:
        return Part(params_for(APPLIERS[f"gpucluster.fabric.{role}"][0], part))
    given = {key: value for key, value in part.items() if key != "applier"}
    missing = sorted(set(spec) - set(given))
    if missing:
        raise ValueError(f"the intent's {role} part has no {', '.join(missing)} (an intent of another version)")
    return Part(params_for(spec, given))


def _collect_params(host, roles, validate, nccl):
    """The collector's arguments from the intent's parts (``validate``, ``nccl``: intent_part's, {} where absent)."""
    interfaces = validate.get("interfaces")
    if interfaces is None:
        interfaces = (intent_part(roles, "fabric_interfaces") or {}).get("interfaces") or []
    # Where the intent says nothing (no such role on the host, an empty value), the collector's own default.
    given = {
        "root": validate.get("sysfs_root"),
        "max_nic_distance": validate.get("max_nic_distance"),
        "nccl_conf_path": nccl.get("conf_path") if nccl else None,
    }
    args = {
        **{name: value for name, value in given.items() if value},
        "modules": list(validate.get("required_modules") or []),
        "interfaces": expected_interface_mtus(interfaces),
        # The subnet manager is asked from the node itself only: where the inventory asks it from another host
        # (fabric_validate_sm_query_host), the fleet report does, and the node's check says so.
        "sm_query": validate.get("sm_query_host") in (None, "", host),
        "sm_query_environment": validate.get("sm_query_environment") or {},
        "sm_query_timeout": SM_QUERY_TIMEOUT,
        # Read for the fleet report, which compares them across nodes (fleet.version[...]).
        "packages": list(validate.get("fleet_packages") or []),
    }
    return params_for(COLLECT_SPEC, args)


def health(host, roles, applied, module_class=NodeModule, collected=None, inputs=None, expected=None):
    """(checks, versions): the health tier's checks of this host (fabric_checks.health_checks), on what is read here,
    and the software versions read (what the fleet report compares across nodes); ``applied``: the appliers' results
    of the drift checks ({role: result}), whose GPUDirect decision the health tier judges.

    Role fabric_validate gives what its module read (``collected``), the record's ``inputs`` from the play
    (collected_record) and what it ``expected`` of the ports; else each is the intent's."""
    # Each part typed once per run (intent_part), read below by what the check collects and what it judges.
    validate = intent_part(roles, "fabric_validate") or {}
    nccl = intent_part(roles, "nccl") or {}
    if collected is None:
        params = _collect_params(host, roles, validate, nccl)
        module = module_class(params)
        try:
            collected = collect(module, params)
        except CollectError as exc:
            return [_check(host, TIER, "rdma.device", "failed", f"cannot read the host's fabric: {exc}")], None
        except StepDone as done:
            message = f"cannot read the host's fabric: {done.result.get('msg')}"
            return [_check(host, TIER, "rdma.device", "failed", message)], None
    if inputs is None:
        gpudirect = (applied.get("rdma_modules") or {}).get("gpudirect")
        inputs = {
            "gpudirect": gpudirect if isinstance(gpudirect, dict) and gpudirect.get("mode") else None,
            "allowed_debug": nccl.get("allow_debug_variables") or [],
            "gid_family": nccl.get("ib_addr_family") or "ipv4",
            "require_pfc": bool((intent_part(roles, "roce_qos") or {}).get("require_pfc")),
            "declared_roce": [],  # the RoCE QoS is judged by drift.roce_qos, with the role's own code
        }
    if expected is None:
        expected = {"rate_gbps": validate.get("expected_rate_gbps"), "active_mtu": validate.get("expected_active_mtu")}
    # Not asked here (the inventory asks from another host): each InfiniBand port's sm.master is skipped, saying so.
    record = with_sm(collected_record(collected, inputs), collected.get("sminfo") or [], host)
    return health_checks(host, record, expected), collected["versions"]


def subnet_manager_checks(host, opensm, module):
    """On a subnet manager (role opensm in the intent): its OpenSM unit runs (``opensm.running``), and a master
    subnet manager answers sminfo from this host (``sm.master``), with the diagnostics' environment the inventory
    gives (opensm_diag_environment)."""
    unit = opensm["unit"] or "opensm.service"
    checks = []
    systemctl = module.get_bin_path("systemctl")
    if systemctl:
        _rc, out, _err = module.run_command([systemctl, "is-active", unit])
        state = out.strip() or "unknown"
        fix = f": start it (systemctl start {unit}) and read why it stopped (journalctl -u {unit})"
        message = f"{unit} is {state}" + ("" if state == "active" else fix)
        status = "passed" if state == "active" else "failed"
        checks.append(_check(host, TIER, "opensm.running", status, message, state, "active"))
    else:
        checks.append(_check(host, TIER, "opensm.running", "skipped", "skipped: no systemctl on this host"))
    timeout = module.get_bin_path("timeout") or "timeout"
    rc, out, err = module.run_command(
        [timeout, str(SM_QUERY_TIMEOUT), "sminfo"], environ_update=dict(opensm["diag_environment"] or {})
    )
    outcome = sminfo_outcome(rc, out, err)
    status, message, measured = sm_verdict("the fabric", outcome, host, host)
    checks.append(_check(host, TIER, "sm.master", status, message, measured, "SMINFO_MASTER"))
    answer = outcome[1] if outcome[0] == "answered" and outcome[1]["master"] else None
    checks.append(own_sm_state(host, unit, module, dict(opensm["diag_environment"] or {}), answer))
    return checks + isolation(host, opensm, module, answer["guid"] if answer else None)


def _port_guid_of(ibaddr_output):
    """The port GUID in ``ibaddr``'s ``GID fe80::2:c903:a0:1 LID start ...`` (the GID's interface identifier), or
    None."""
    found = re.search(r"GID\s+(\S+)", ibaddr_output or "")
    try:
        return int(ipaddress.IPv6Address(found.group(1))) & 0xFFFFFFFFFFFFFFFF if found else None
    except ValueError:
        return None


def own_sm_state(host, unit, module, environment, master):
    """``sm.state``: the state of this host's own subnet manager (SMInfo of its port: ``ibaddr`` gives the LID of the
    port its unit binds; where that is the master's LID, ``master``'s answer is this SM's, else ``sminfo <LID>`` asks
    it). MASTER or STANDBY passes; the fleet report's ``fleet.sm_master`` then wants exactly one MASTER."""
    timeout = module.get_bin_path("timeout") or "timeout"
    rc, out, err = module.run_command([timeout, str(SM_QUERY_TIMEOUT), "ibaddr"], environ_update=environment)
    # ibaddr reads the host's first port. OpenSM binds the port of its unit's instance (opensm@<port GUID>.service):
    # where that is another port (a host of several), ibaddr -G asks the subnet administrator for its LID.
    bound = re.search(r"@(0x[0-9a-fA-F]+)\.service$", unit)
    if rc == 0 and bound and _port_guid_of(out) not in (None, int(bound.group(1), 16)):
        rc, out, err = module.run_command(
            [timeout, str(SM_QUERY_TIMEOUT), "ibaddr", "-G", bound.group(1)], environ_update=environment
        )
    found = re.search(r"LID start (0x[0-9a-fA-F]+|\d+)", out or "")
    if rc != 0 or not found:
        said = " ".join((err or out or f"rc {rc}").split())[:200]
        return _check(host, TIER, "sm.state", "failed", f"cannot read this host's port LID (ibaddr: {said})")
    lid = int(found.group(1), 0)
    if master and master["lid"] == lid:
        answer = master
    else:
        rc, out, err = module.run_command(
            [timeout, str(SM_QUERY_TIMEOUT), "sminfo", str(lid)], environ_update=environment
        )
        kind, answer = sminfo_outcome(rc, out, err)
        if kind != "answered":
            message = f"the subnet manager at this host's port (LID {lid}) does not answer ({kind}: {answer}): {unit}"
            return _check(host, TIER, "sm.state", "failed", message, None, " or ".join(SM_GOOD_STATES))
    state = answer["state_name"]
    text = f"this host's subnet manager (LID {lid}, priority {answer['priority']}) is {state}"
    if state in SM_GOOD_STATES:
        return _check(host, TIER, "sm.state", "passed", text, state, " or ".join(SM_GOOD_STATES))
    fix = f": it has not joined the subnet managers' handover; read journalctl -u {unit}"
    return _check(host, TIER, "sm.state", "failed", text + fix, state, " or ".join(SM_GOOD_STATES))


def isolation(host, opensm, module, master_guid):
    """Tenant isolation read from the fabric, on a subnet manager: every channel adapter port ``ibnetdiscover -p``
    finds, its P_Key table (``smpquery pkeys <LID>``), against the intent's partitions (``partition_list``: the
    model partitions.conf is rendered from, opensm_partitions.partition_list; fabric_checks.isolation_checks);
    ``master_guid``: the master SM's port, partitions.conf's ``SELF``."""
    partitions = opensm["partition_list"]
    if not partitions:
        return []
    environment = dict(opensm["diag_environment"] or {})
    timeout = module.get_bin_path("timeout") or "timeout"
    rc, out, err = module.run_command(
        [timeout, str(SM_QUERY_TIMEOUT * 4), "ibnetdiscover", "-p"], environ_update=environment
    )
    ports = parse_ca_ports(out) if rc == 0 else []
    if not ports:
        said = " ".join((err or out).split())[:200] or f"rc {rc}"
        return [_check(host, TIER, "partition", "skipped", f"skipped: ibnetdiscover -p found no port to read ({said})")]

    def read(port):
        rc, out, err = module.run_command(
            [timeout, str(SM_QUERY_TIMEOUT), "smpquery", "pkeys", str(port["lid"])], environ_update=environment
        )
        port["pkeys"] = parse_pkey_table(out) if rc == 0 else None
        port["error"] = None if rc == 0 else " ".join((err or out).split())[:200] or f"rc {rc}"
        return rc

    # Ports are read side by side, each bounded, the whole under the run's deadline: a fabric of silent ports costs
    # the deadline, not 5 s a port.
    with concurrent.futures.ThreadPoolExecutor(max_workers=ISOLATION_WORKERS) as pool:
        codes = list(pool.map(read, ports))
    again = [port for port, rc in zip(ports, codes) if rc not in (0, 124)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=ISOLATION_RETRY_WORKERS) as pool:
        list(pool.map(read, again))
    self_guid = port_guid(master_guid) if master_guid else None
    return isolation_checks(host, partitions, ports, self_guid)


def selected(name, only, skip):
    """Whether check ``name`` is judged: it matches a pattern of ``only`` (when given) and none of ``skip``. A pattern
    matches a name (fnmatch), or the family of a name with a subject (port.state matches port.state[mlx5_0/1])."""

    def matches(pattern):
        return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(name.split("[", 1)[0], pattern)

    return (not only or any(matches(p) for p in only)) and not any(matches(p) for p in skip)


def pattern_errors(patterns, variable):
    """What is wrong with the check-name patterns of ``variable`` (node_check_only, node_check_skip): each must name
    a family of FAMILIES, or a check of one (a subject in brackets), with fnmatch wildcards."""
    errors = []
    for pattern in patterns if isinstance(patterns, (list, tuple)) else [patterns]:
        family = str(pattern).split("[", 1)[0]
        if not isinstance(pattern, str) or not pattern or not fnmatch.filter(FAMILIES, family):
            errors.append(
                f"{variable}: {pattern!r} names no check of the node check; use one of {', '.join(FAMILIES)} "
                "(wildcards allowed; a subject in brackets, e.g. port.state[mlx5_0/1], names one port)"
            )
    return errors


def _past_deadline():
    return NodeModule.deadline is not None and time.monotonic() >= NodeModule.deadline


def _guarded(host, family, work):
    """``work()``'s checks, or one ``error`` check naming ``family`` and the exception: one family's bug (or an input
    it cannot read) never hides the other families' checks, and is never a pass or a node fault."""
    try:
        return list(work())
    except Exception as exc:  # noqa: BLE001 - the point: any exception becomes a verdict
        message = f"the node check's {family} checks broke ({_exception_line(exc)}): not a verdict on the node"
        return [_check(host, TIER, family, "error", message + "; report it with this line")]


def _exception_line(exc):
    """``Type: message at file:line`` of an exception, on one line."""
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    at = f" at {os.path.basename(where.filename)}:{where.lineno}" if where else ""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}{at}"


def run_checks(document, only=(), skip=(), module_class=NodeModule, **given):
    """(checks, versions): every check of the host whose intent is ``document``, in order (drift per role, then
    health), and the software versions read. ``given``: health's ``collected``, ``inputs`` and ``expected``.

    Each family runs guarded (_guarded); past the run's deadline (NodeModule.deadline) no family starts, and one
    ``deadline`` check names what was not checked; each command that ran out of time is a failed ``tool.timeout``."""
    host = document.get("host") or os.uname().nodename
    roles = document.get("roles") or {}
    if not isinstance(roles, dict):
        return [_check(host, TIER, "intent", "error", "the intent's roles are not a mapping")], None
    checks, applied, versions, left_out = [], {}, None, []
    NodeModule.timed_out = []
    for role in DRIFT_ROLES:
        if role not in roles:
            continue
        name = f"drift.{role}"
        if not selected(name, only, skip):
            checks.append(_check(host, TIER, name, "skipped", f"skipped: {name} is not selected (node_check_skip)"))
            continue
        if _past_deadline():
            left_out.append(name)
            continue
        check, result = drift_check(host, role, roles[role], module_class)
        checks.append(check)
        applied[role] = result

    def health_family():
        nonlocal versions
        found, versions = health(host, roles, applied, module_class, **given)
        return found

    families = [
        ("health", health_family),
        ("hca.firmware", lambda: firmware_checks(host, applied.get("hca_firmware"))),
    ]
    if "opensm" in roles:
        families.append(("opensm", lambda: subnet_manager_checks(host, intent_part(roles, "opensm"), module_class({}))))
    judged = []
    for family, work in families:
        if _past_deadline():
            left_out.append(family)
            continue
        judged += _guarded(host, family, work)
    for tool, seconds in NodeModule.timed_out:
        message = (
            f"{tool} did not answer within {seconds:g} s and was stopped: the checks that read it could not judge "
            f"the node; find out why {tool} hangs (a device off the bus, a stuck driver)"
        )
        judged.append(_check(host, TIER, f"tool.timeout[{tool}]", "failed", message, seconds, None, "s"))
    if left_out:
        message = (
            f"skipped: the run reached its deadline ({RUN_DEADLINE} s) before these were checked: "
            f"{', '.join(left_out)}; the tool.timeout checks say what took the time"
        )
        judged.append(_check(host, TIER, "deadline", "skipped", message))
    for check in judged:
        # A check that broke is never hidden by the selection: it is no verdict, and must stay visible.
        if check["status"] != "error" and not selected(check["check"], only, skip):
            check = dict(
                check, status="skipped", message=f"skipped: not selected (node_check_skip): {check['message']}"
            )
        checks.append(check)
    return checks, versions


def read_intent(path):
    """(document, problems): the host's intent file, and what makes it unusable (intent.errors)."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError) as exc:
        return None, [f"cannot read the intent {path}: {exc}; run site.yml (gpucluster.fabric.intent)"]
    return document, intent_file.errors(document)


def validate_checks(host, collected, inputs, expected, intent_path=intent_file.PATH, module_class=NodeModule):
    """Role fabric_validate's health tier, which is the node check: run_checks on what module fabric_validate_collect
    read (``collected``), judged with the play's ``inputs`` and ``expected``, and, where site.yml wrote the host's
    intent, the drift of every setting the roles manage. Without an intent one skipped ``intent`` check says that
    the settings were not compared; an intent that cannot be read or used fails it."""
    document, lead = {"host": host, "roles": {}}, []
    if not os.path.exists(intent_path):
        message = (
            f"skipped: no intent at {intent_path}: the settings the roles manage are not compared (site.yml writes "
            "it, with playbook gpucluster.fabric.intent)"
        )
        lead.append(_check(host, TIER, "intent", "skipped", message))
    else:
        found, problems = read_intent(intent_path)
        if problems:
            lead.append(_check(host, TIER, "intent", "failed", "; ".join(problems)))
        else:
            document = dict(found, host=host)
    checks, _versions = run_checks(
        document, module_class=module_class, collected=collected, inputs=inputs, expected=expected
    )
    return lead + checks


# --- Slurm: drain a node whose fabric fails, resume only the nodes it drained ------------------------------------

SLURM_REASON_PREFIX = "fabric: "
SLURM_REASON_LENGTH = 200
# What the check remembers between runs for Slurm (root only): its streaks and the drain it set.
STATE_PATH = "/var/lib/gpucluster/fabric-check-state.json"
BREAKER_SETTLE = 2  # seconds between a drain and counting the partition again (slurm_act)
# A node in any of these states is someone else's (an operator, Slurm, a reboot, power saving): never drained or
# resumed, whatever the checks say (LBNL NHC leaves DOWN, reboot and boot states alone the same way).
SLURM_HANDS_OFF = frozenset(
    {
        "DOWN",
        "FAIL",
        "FAILING",
        "MAINT",
        "REBOOT",
        "REBOOT_REQUESTED",
        "REBOOT_ISSUED",
        "POWER_DOWN",
        "POWERED_DOWN",
        "POWERING_DOWN",
        "POWERING_UP",
        "NOT_RESPONDING",
        "FUTURE",
        "UNKNOWN",
        "INVALID_REG",
    }
)
SLURM_DRAINED = frozenset({"DRAIN", "DRAINED", "DRAINING"})
# Failed checks of the fabric as a whole, which no node can fix by itself (the master subnet manager, OpenSM, the
# partitions the SM holds): they show in the report and the metrics, and never drain a node.
FABRIC_WIDE = ("sm.master", "sm.state", "opensm.running", "partition", "partition.port")


def _family(check):
    return check["check"].split("[", 1)[0]


def node_faults(report):
    """The failed checks of ``report`` that are this node's own faults, or None when the run judged nothing (it could
    not check, or it broke). Not faults of the node: FABRIC_WIDE checks, and firmware settings that only wait for a
    reboot (a planned change on its way: hca_firmware_reboot_method)."""
    if report.get("status") not in ("passed", "failed") or report.get("checks") is None:
        return None
    return [
        c
        for c in report["checks"]
        if c["status"] == "failed" and _family(c) not in FABRIC_WIDE and c.get("unit") != PENDING_REBOOT
    ]


def parse_scontrol_node(text):
    """{flags, reason, partitions} of ``scontrol -o show node <name>`` (one line): the state's words (IDLE+DRAIN ->
    {IDLE, DRAIN}; a trailing ``*`` is NOT_RESPONDING), the reason without its ``[user@time]`` stamp and without the
    fields later Slurm versions print after it (Comment=, Extra=, ...)."""
    state = re.search(r"(?:^|\s)State=(\S+)", text)
    words = state.group(1) if state else ""
    flags = {word.rstrip("*$@^-~#!%") for word in words.upper().split("+") if word}
    if "*" in words:
        flags.add("NOT_RESPONDING")
    reason = re.search(r"(?:^|\s)Reason=(.*?)(?:\s\[[^\]]*@[^\]]*\])?(?=\s[A-Z][A-Za-z]*=|\s*$)", text.strip())
    partitions = re.search(r"(?:^|\s)Partitions=(\S+)", text)
    return {
        "flags": flags,
        "reason": reason.group(1).strip() if reason else "",
        "partitions": partitions.group(1).split(",") if partitions else [],
    }


def parse_scontrol_json(text):
    """The same from ``scontrol show node <name> --json`` (Slurm 21.08 and later: ``state`` a word and
    ``state_flags`` a list before 23.02, one list of words from 23.02 on), or None when it is not that."""
    try:
        nodes = json.loads(text).get("nodes") or []
    except (ValueError, AttributeError):
        return None
    if len(nodes) != 1 or not isinstance(nodes[0], dict):
        return None
    node = nodes[0]
    if "state" not in node or "reason" not in node:
        return None  # a layout this code does not know: the one-line form is read instead
    state = node.get("state") or []
    words = [state] if isinstance(state, str) else list(state)
    words += list(node.get("state_flags") or [])
    partitions = node.get("partitions") or []
    return {
        "flags": {str(word).upper() for word in words},
        "reason": str(node.get("reason") or "").strip(),
        "partitions": partitions.split(",") if isinstance(partitions, str) else [str(p) for p in partitions],
    }


def slurm_reason(faults):
    """``fabric: <check>: <detail>`` of the first of ``faults`` (and how many more), cut to SLURM_REASON_LENGTH."""
    text = SLURM_REASON_PREFIX + " ".join(reason(faults).split())
    return text if len(text) <= SLURM_REASON_LENGTH else text[: SLURM_REASON_LENGTH - 3] + "..."


def drain_limit(max_drained, nodes):
    """How many of ``nodes`` the check may hold drained at once: ``max_drained`` below 1 is a share of the partition
    (at least one node), from 1 on a count."""
    if max_drained >= 1:
        return int(max_drained)
    return max(1, int(max_drained * nodes))


def slurm_decision(node, report, memory, settings, now, census=None):
    """(action, reason, why): what the node check does to the Slurm node ``node`` ({flags, reason}) after
    ``report``; ``memory`` (what it remembers between runs: its streaks and its own drain) is updated in place.

    A node is drained only after ``drain_after`` failing runs in a row that outlast one ``interval``, and only for its
    own faults (not FABRIC_WIDE ones); it is resumed only after ``resume_after`` clean runs in a row, and only from
    the drain the check set itself, while Slurm still holds that drain's reason. No new drain while ``census()``
    ((drained by the check, nodes) of the node's partitions) is at drain_limit: the breaker. A node in a state of
    SLURM_HANDS_OFF, drained by anyone else, or after a run that judged nothing, is left as it is."""
    faults = node_faults(report)
    if faults:
        memory["failing_runs"] = memory.get("failing_runs", 0) + 1
        if memory.get("failing_since") is None:
            memory["failing_since"] = now
        memory["passing_runs"] = 0
    elif faults is not None:
        memory.update(passing_runs=memory.get("passing_runs", 0) + 1, failing_runs=0, failing_since=None)
    drained = bool(node["flags"] & SLURM_DRAINED)
    ours = drained and bool(memory.get("drained_reason")) and node["reason"] == memory["drained_reason"]
    if memory.get("drained_reason") and not ours:
        memory["drained_reason"] = None  # resumed, or drained again, by someone else: no longer the check's
    hands_off = sorted(node["flags"] & SLURM_HANDS_OFF)
    if hands_off:
        return None, None, f"left alone: Slurm has the node {'+'.join(hands_off)}"
    if faults is None:
        return None, None, "the check judged nothing (it could not check, or it broke): Slurm is left as it is"
    if drained and not ours:
        return None, None, f"drained by someone else ({node['reason'] or 'no reason'}): left as it is"
    if faults:
        wanted = slurm_reason(faults)
        if ours:
            if node["reason"] == wanted:
                return None, None, "drained already, for this reason"
            memory["drained_reason"] = wanted
            return "drain", wanted, "a check still fails, for another reason than the drain says"
        runs, since = memory["failing_runs"], now - memory["failing_since"]
        if runs < settings["drain_after"] or (settings["drain_after"] > 1 and since < settings["interval"]):
            return (
                None,
                None,
                (
                    f"failing for {runs} run(s), {since:.0f} s: a drain waits for {settings['drain_after']} runs over "
                    f"{settings['interval']} s (hysteresis)"
                ),
            )
        try:
            held, nodes = census() if census else ([], 1)
            held = len(held)
        except RuntimeError as exc:
            return None, None, f"breaker: the partition's drains cannot be counted ({exc}): no new drain"
        limit = drain_limit(settings["max_drained"], nodes)
        if held >= limit:
            return (
                None,
                None,
                (
                    f"breaker: {held} of the partition's {nodes} node(s) are drained by the check already (at "
                    f"most {limit}: node_check_slurm_max_drained): this node is not drained; a fault shared by many "
                    "nodes is the fabric's, see the fleet report"
                ),
            )
        memory["drained_reason"] = wanted
        return "drain", wanted, "a check failed"
    if ours and memory["passing_runs"] >= settings["resume_after"]:
        memory["drained_reason"] = None
        return "resume", None, f"every check of its own passes again ({memory['passing_runs']} runs)"
    if ours:
        return None, None, f"passing for {memory['passing_runs']} run(s): a resume waits for {settings['resume_after']}"
    return None, None, "nothing to do"


def slurm_node_state(module, node_name):
    """(node, problem): the node as Slurm has it (JSON where scontrol gives it, else its one-line form), or why not."""
    scontrol = module.get_bin_path("scontrol")
    if not scontrol:
        return None, "scontrol not found: Slurm is not installed here"
    rc, out, err = module.run_command([scontrol, "show", "node", node_name, "--json"], timeout=SLURM_TIMEOUT)
    node = parse_scontrol_json(out) if rc == 0 else None
    if node is None and rc != 124:
        rc, out, err = module.run_command([scontrol, "-o", "show", "node", node_name], timeout=SLURM_TIMEOUT)
        node = parse_scontrol_node(out) if rc == 0 and "NodeName=" in out else None
    if node is None:
        detail = " ".join((err or out).split())[:200] or f"rc {rc}"
        if rc == 124 or "Unable to contact slurm controller" in detail:
            return None, f"the Slurm controller did not answer ({detail})"
        return None, f"Slurm does not know the node yet ({detail}): left alone"
    return node, None


def slurm_census(module, partitions):
    """(drained by the check, nodes) in ``partitions``, from ``sinfo`` (its format string, which Slurm keeps): the
    drained ones as [(when the reason was set, name)], oldest first."""
    sinfo = module.get_bin_path("sinfo")
    argv = [sinfo or "sinfo", "-h", "-N", "-o", "%N|%t|%H|%E"] + (["-p", ",".join(partitions)] if partitions else [])
    rc, out, err = module.run_command(argv, timeout=SLURM_TIMEOUT)
    if rc != 0:
        raise RuntimeError(f"sinfo: {' '.join((err or out).split())[:200] or rc}")
    nodes, held = set(), set()
    for line in out.splitlines():
        name, state, stamp, reason = (line.split("|", 3) + ["", "", ""])[:4]
        nodes.add(name)
        if state.rstrip("*$@^-~#!%") in ("drain", "drng", "drained", "draining") and reason.startswith(
            SLURM_REASON_PREFIX
        ):
            held.add((stamp, name))
    return sorted(held), max(len(nodes), 1)


def breaker_keeps(node_name, census, max_drained):
    """After its own drain: whether ``node_name`` is within the breaker's limit, the older drains first (then by
    name). Nodes that drained at the same moment all count each other: those past the limit undo their drain."""
    held, nodes = census()
    kept = [name for _stamp, name in held[: drain_limit(max_drained, nodes)]]
    return node_name in kept, len(held), nodes


def slurm_settings(config):
    """The hysteresis and breaker settings of the node check's configuration, as slurm_decision reads them."""
    return {
        "drain_after": config["slurm_drain_after"],
        "resume_after": config["slurm_resume_after"],
        "max_drained": config["slurm_max_drained"],
        "interval": config["interval"],
    }


def read_memory(path):
    try:
        with open(path, encoding="utf-8") as handle:
            memory = json.load(handle)
        return memory if isinstance(memory, dict) else {}
    except (OSError, ValueError):
        return {}


def slurm_act(module, node_name, report, memory=None, settings=None, now=None, hold=None):
    """Read the node's state, decide (slurm_decision) and act; {node, flags, reason, action, why[, error]}. Before
    slurmd has registered the node, while no controller answers, or while a converge holds the node (``hold``:
    read_hold's), nothing is done, and the hysteresis's streaks are left as they were."""
    memory = {} if memory is None else memory
    settings = dict(slurm_settings(CONFIG_DEFAULTS), **(settings or {}))
    node, problem = slurm_node_state(module, node_name)
    if node is None:
        return {"node": node_name, "action": None, "why": problem}
    if hold:
        # What failed or passed before the converge says nothing of the node it makes: the streaks start again.
        memory.update(failing_runs=0, failing_since=None, passing_runs=0)
        until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(hold[0]))
        return {
            "node": node_name,
            "state": "+".join(sorted(node["flags"])),
            "reason": node["reason"],
            "action": None,
            "held_until": hold[0],
            "held_by": hold[1],
            "why": f"held: {hold[1]} is changing the node (until {until} at the latest): Slurm is left as it is",
        }

    def census():
        return slurm_census(module, node["partitions"])

    now = time.time() if now is None else now
    action, reason_text, why = slurm_decision(node, report, memory, settings, now, census)
    outcome = {
        "node": node_name,
        "state": "+".join(sorted(node["flags"])),
        "reason": node["reason"],
        "action": action,
        "why": why,
        "breaker": why.startswith("breaker:"),
    }
    scontrol = module.get_bin_path("scontrol")
    if action == "drain":
        argv = [scontrol, "update", f"nodename={node_name}", "state=drain", f"reason={reason_text}"]
    elif action == "resume":
        argv = [scontrol, "update", f"nodename={node_name}", "state=resume"]
    else:
        return outcome
    rc, out, err = module.run_command(argv, timeout=SLURM_TIMEOUT)
    if rc != 0:
        outcome["error"] = " ".join((err or out).split()) or f"scontrol exited {rc}"
        if action == "drain":
            memory["drained_reason"] = None
    elif action == "drain" and not node["flags"] & SLURM_DRAINED:
        # Nodes deciding at the same moment each saw the others undrained: counted again once their drains have
        # landed, a drain past the breaker's limit is undone at once (the older drains, then the names, keep theirs).
        time.sleep(BREAKER_SETTLE)
        try:
            kept, held, nodes = breaker_keeps(node_name, census, settings["max_drained"])
        except RuntimeError as exc:
            kept, held, nodes, outcome["why"] = False, None, None, f"breaker: cannot count the drains again ({exc})"
        if not kept:
            module.run_command([scontrol, "update", f"nodename={node_name}", "state=resume"], timeout=SLURM_TIMEOUT)
            memory["drained_reason"] = None
            outcome.update(action="drain undone", breaker=True)
            if held is not None:
                outcome["why"] = (
                    f"breaker: drained at the same moment as others, {held} of the partition's {nodes} node(s): past "
                    "node_check_slurm_max_drained, so this drain was undone at once"
                )
    return outcome


# --- outputs ---------------------------------------------------------------------------------------------------------


def summary(checks):
    counts = {state: len([c for c in checks if c["status"] == state]) for state in STATES}
    counts["total"] = len(checks)
    return counts


def reason(checks, status="failed"):
    """One line for a scheduler: ``<check>: <message>`` of the first failed check (and how many more), or ''."""
    failed = [c for c in checks if c["status"] == status]
    if not failed:
        return ""
    first = " ".join(str(failed[0]["message"]).split())
    more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
    return f"{failed[0]['check']}: {first}{more}"


def _label(value):
    # A name read from the node may hold any byte (a netdev name planted by a tenant): escaped, never a crash.
    text = str(value).encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def check_labels(name):
    """The labels of check ``name`` that join other series: ``check``, its ``family`` and ``subject`` (what is in
    brackets), and where the subject is an RDMA port (``mlx5_0/1``) its ``device`` and ``port``, as node_exporter's
    node_infiniband_* series have them, or where it is a network interface (``interface.*[eth1]``) its ``device``,
    as node_network_* have it."""
    family, _bracket, rest = name.partition("[")
    subject = rest[:-1] if rest.endswith("]") else rest
    labels = {"check": name, "family": family, "subject": subject}
    port = re.fullmatch(r"([^/\s]+)/(\d+)", subject)
    if port:
        labels.update(device=port.group(1), port=port.group(2))
    elif subject and family.startswith("interface."):
        labels["device"] = subject
    return labels


# Per family, at most this many checks get series of their own (a subnet manager checks each port of the fabric:
# 1,000 ports would be 4,000 series); past it, the checks that are not passed or skipped first, and the family's
# counts (gpucluster_fabric_check_family) always.
FAMILY_SERIES = 64


def _series_checks(checks):
    """The checks that get gpucluster_fabric_check_state series, at most FAMILY_SERIES per family, the ones that
    failed or broke first; and {family: how many were left out}."""
    by_family = {}
    for check in checks:
        by_family.setdefault(_family(check), []).append(check)
    kept, left_out = set(), {}
    for family, members in by_family.items():
        if len(members) > FAMILY_SERIES:
            members = sorted(members, key=lambda c: c["status"] not in ("failed", "error"))
            left_out[family] = len(members) - FAMILY_SERIES
        kept.update(id(check) for check in members[:FAMILY_SERIES])
    return [check for check in checks if id(check) in kept], left_out


def metrics(report):
    """The report as Prometheus text exposition (node_exporter's textfile collector reads it)."""
    up = 1 if report.get("checks") is not None else 0
    lines = [
        "# HELP gpucluster_fabric_check_info The node check that wrote these series: the collection's version and "
        "the report's and the intent's schemas.",
        "# TYPE gpucluster_fabric_check_info gauge",
        f'gpucluster_fabric_check_info{{version="{COLLECTION_VERSION}",schema="{SCHEMA}",'
        f'intent_schema="{intent_file.SCHEMA}"}} 1',
        "# HELP gpucluster_fabric_check_up Whether the node check could check the node (0: no usable intent or "
        "configuration, or the check broke).",
        "# TYPE gpucluster_fabric_check_up gauge",
        f"gpucluster_fabric_check_up {up}",
        "# HELP gpucluster_fabric_check_last_run_timestamp_seconds When the node check last ran (Unix time).",
        "# TYPE gpucluster_fabric_check_last_run_timestamp_seconds gauge",
        f"gpucluster_fabric_check_last_run_timestamp_seconds {report['started']:.3f}",
        "# HELP gpucluster_fabric_check_duration_seconds How long the node check's last run took.",
        "# TYPE gpucluster_fabric_check_duration_seconds gauge",
        f"gpucluster_fabric_check_duration_seconds {report['duration_seconds']:.3f}",
    ]
    if up:
        shown, left_out = _series_checks(report["checks"])
        families = {}
        for check in report["checks"]:
            counts = families.setdefault(_family(check), dict.fromkeys(STATES, 0))
            counts[check["status"]] = counts.get(check["status"], 0) + 1
        lines += [
            "# HELP gpucluster_fabric_checks The node check's checks of its last run, by state.",
            "# TYPE gpucluster_fabric_checks gauge",
            *(f'gpucluster_fabric_checks{{state="{state}"}} {report["summary"][state]}' for state in STATES),
            "# HELP gpucluster_fabric_check_family The node check's checks of its last run, by family and state.",
            "# TYPE gpucluster_fabric_check_family gauge",
            *(
                f'gpucluster_fabric_check_family{{family="{_label(family)}",state="{state}"}} {counts[state]}'
                for family, counts in sorted(families.items())
                for state in STATES
            ),
            "# HELP gpucluster_fabric_check_state Each check's state in the node check's last run: 1 for the state "
            f"it is in, 0 for the others ({FAMILY_SERIES} checks of a family at most, those not passed first).",
            "# TYPE gpucluster_fabric_check_state gauge",
        ]
        for check in shown:
            labels = ",".join(f'{key}="{_label(value)}"' for key, value in check_labels(check["check"]).items())
            for state in STATES:
                value = 1 if check["status"] == state else 0
                lines.append(f'gpucluster_fabric_check_state{{{labels},state="{state}"}} {value}')
        if left_out:
            lines += [
                "# HELP gpucluster_fabric_check_series_left_out Checks of a family without series of their own "
                f"(past {FAMILY_SERIES}): the report has them all.",
                "# TYPE gpucluster_fabric_check_series_left_out gauge",
                *(
                    f'gpucluster_fabric_check_series_left_out{{family="{_label(family)}"}} {count}'
                    for family, count in sorted(left_out.items())
                ),
            ]
    if report.get("tool_timeouts"):
        lines += [
            "# HELP gpucluster_fabric_check_tool_timeout_seconds A command of the last run that did not answer within "
            "its limit and was stopped (the checks' tools and Slurm's scontrol and sinfo): its limit.",
            "# TYPE gpucluster_fabric_check_tool_timeout_seconds gauge",
            *(
                f'gpucluster_fabric_check_tool_timeout_seconds{{tool="{_label(tool)}"}} {seconds:g}'
                for tool, seconds in sorted(report["tool_timeouts"].items())
            ),
        ]
    slurm = report.get("slurm") or {}
    if "breaker" in slurm:
        lines += [
            "# HELP gpucluster_fabric_check_slurm_breaker 1 when the last run did not drain the node because the "
            "partition already has node_check_slurm_max_drained nodes drained by the check.",
            "# TYPE gpucluster_fabric_check_slurm_breaker gauge",
            f"gpucluster_fabric_check_slurm_breaker {1 if slurm['breaker'] else 0}",
        ]
    if "held_until" in slurm:
        lines += [
            "# HELP gpucluster_fabric_check_held_until_timestamp_seconds Until when a converge (site.yml) holds the "
            "check's Slurm actions on this node (Unix time).",
            "# TYPE gpucluster_fabric_check_held_until_timestamp_seconds gauge",
            f"gpucluster_fabric_check_held_until_timestamp_seconds {slurm['held_until']:.0f}",
        ]
    return "\n".join(lines) + "\n"


def write_atomic(path, text, mode):
    """``path`` holds ``text`` (``mode``) or its old content, never a part: a temporary file beside it, renamed.

    Everything happens through a handle on the directory, opened without following a link, and the directory must
    belong to the user who writes (root, on a node): whoever may rename entries there (on Debian the textfile
    directory's parent belongs to the prometheus user) can neither point the write elsewhere nor have root chmod a
    file of their choosing. ``os.replace`` and ``os.open`` take the directory's handle; nothing goes by path after."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o755, exist_ok=True)
    handle = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        owner = os.fstat(handle).st_uid
        if owner != os.geteuid():
            raise PermissionError(
                f"{directory} belongs to uid {owner}, not to the uid writing ({os.geteuid()}): not written there; "
                "make the directory root's (node_check_textfile_dir, node_check_report)"
            )
        name = os.path.basename(path)
        temporary = f".gpucluster-{os.getpid()}-{time.monotonic_ns()}.tmp"
        out = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=handle)
        try:
            with os.fdopen(out, "w", encoding="utf-8") as stream:
                stream.write(text)
                stream.flush()
                os.fchmod(stream.fileno(), mode)
            os.replace(temporary, name, src_dir_fd=handle, dst_dir_fd=handle)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=handle)
            raise
    finally:
        os.close(handle)


def load_config(path):
    """The node check's configuration (module node_check writes it): CONFIG_DEFAULTS and what the file says."""
    config = dict(CONFIG_DEFAULTS)
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            config.update(json.load(handle))
    return config


def check_node(intent_path=intent_file.PATH, config=None, module_class=NodeModule, clock=time.time, deadline=None):
    """The report of one run: {schema, host, started, duration_seconds, status, reason, summary, checks}.
    ``deadline``: seconds after which no family starts and no command runs (run_checks)."""
    config = dict(CONFIG_DEFAULTS, **(config or {}))
    started = clock()
    report = {"schema": SCHEMA, "host": os.uname().nodename, "started": started}
    document, problems = read_intent(intent_path)
    problems = pattern_errors(config["only"], "only") + pattern_errors(config["skip"], "skip") + problems
    if problems:
        report.update(status="error", reason="intent: " + "; ".join(problems), checks=None, summary=None)
    else:
        report["host"] = document.get("host") or report["host"]
        NodeModule.deadline = None if deadline is None else time.monotonic() + deadline
        try:
            checks, versions = run_checks(document, config["only"], config["skip"], module_class)
        finally:
            NodeModule.deadline = None
        report["versions"] = versions
        report.update(checks=checks, summary=summary(checks), reason=reason(checks))
        report["status"] = (
            "failed" if report["summary"]["failed"] else "error" if report["summary"]["error"] else "passed"
        )
        if report["status"] == "error":
            report["reason"] = reason(checks, "error")
    report["duration_seconds"] = clock() - started
    return report


def exit_status(report):
    """EXIT_*: what the run found (0, 1), that it could not check the node (2), or that it broke (3)."""
    if report.get("broken") or (report.get("summary") and report["summary"].get("error")):
        return EXIT_BROKEN
    return {"passed": EXIT_PASSED, "failed": EXIT_FAILED}.get(report["status"], EXIT_NOT_CHECKED)


def _locked(path, seconds=LOCK_WAIT):
    """An open file holding an exclusive lock on ``path`` (the timer and Slurm may start a run at once: one waits for
    the other), or None when the lock cannot be had within ``seconds``."""
    import fcntl

    handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - held until the run ends
    deadline = time.time() + seconds
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except OSError:
            if time.time() > deadline:
                handle.close()
                return None
            time.sleep(0.2)


EXIT_HELP = """exit status:
  0  every check passed or was skipped
  1  a check failed: the node has a fault (the report and the metrics say which)
  2  the node could not be checked: no usable intent or configuration, or another run held the lock
  3  the check itself broke (a bug, or an input it could not read): never a verdict on the node
The systemd unit counts 0 and 1 as success, 2 and 3 as failure."""


def _say(line, error):
    """One line for a person, the journal or slurmd: at error priority in the journal (sd-daemon's <3> prefix,
    which journald reads on a service's output) when ``error``."""
    stream = sys.stderr if error else sys.stdout
    prefix = "<3>" if error and os.environ.get("JOURNAL_STREAM") else ""
    stream.write(prefix + line.encode("utf-8", "backslashreplace").decode("utf-8") + "\n")


def _broken_report(exc, started):
    return {
        "schema": SCHEMA,
        "host": os.uname().nodename,
        "started": started,
        "duration_seconds": time.time() - started,
        "status": "error",
        "broken": True,
        "reason": f"the node check broke ({_exception_line(exc)}): not a verdict on the node",
        "checks": None,
        "summary": None,
    }


def main(argv=None):
    """Command line: gpucluster-fabric-check [--intent PATH] [--config PATH] [--json PATH|-] [--no-metrics]
    [--no-slurm] [--only PATTERN ...] [--skip PATTERN ...]. Slurm runs it as HealthCheckProgram (no arguments), and
    so does the timer. Whatever happens, it ends with a report and metrics that say so, and an exit status (EXIT_*)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="gpucluster-fabric-check",
        description=__doc__.split("\n\n", 1)[0],
        epilog=EXIT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {COLLECTION_VERSION} (gpucluster.fabric; report schema {SCHEMA}, intent schema "
        f"{intent_file.SCHEMA})",
    )
    parser.add_argument("--intent", default=intent_file.PATH)
    parser.add_argument("--config", default=CONFIG_PATH)
    parser.add_argument("--json", help="write the report here as well ('-': standard output)")
    parser.add_argument("--no-metrics", action="store_true", help="do not write the textfile metrics or the report")
    parser.add_argument("--no-slurm", action="store_true", help="do not drain or resume the node in Slurm")
    parser.add_argument("--only", nargs="+", metavar="PATTERN", help="judge only these checks (as node_check_only)")
    parser.add_argument("--skip", nargs="+", metavar="PATTERN", help="leave these checks out (as node_check_skip)")
    parser.add_argument("--lock", default=LOCK_PATH, help=argparse.SUPPRESS)
    parser.add_argument("--state", default=STATE_PATH, help=argparse.SUPPRESS)
    parser.add_argument("--hold", default=HOLD_PATH, help=argparse.SUPPRESS)
    parser.add_argument("--deadline", type=float, default=RUN_DEADLINE, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    os.environ["PATH"] = os.pathsep.join([*path, *(d for d in SYSTEM_PATH if d not in path)])
    started = time.time()
    config, report, text = dict(CONFIG_DEFAULTS), None, None
    try:
        try:
            config = load_config(options.config)
        except (OSError, ValueError) as exc:
            problem = f"cannot read {options.config}: {exc}"
        else:
            problem = config_errors(config)
        for key in ("only", "skip"):
            if getattr(options, key) is not None:
                config[key] = getattr(options, key)
        lock = _locked(options.lock)
        if lock is None:
            _say(f"fabric: error: another run held {options.lock} for {LOCK_WAIT} s: this run checked nothing", True)
            return EXIT_NOT_CHECKED
        with lock:
            report = check_node(options.intent, config, deadline=options.deadline)
            if problem:
                report.update(status="error", reason=f"config: {problem}", checks=None, summary=None)
            if config["slurm"] and not options.no_slurm:
                node = config["slurm_node"] or os.uname().nodename.split(".", 1)[0]
                memory = read_memory(options.state)
                hold = read_hold(options.hold, time.time())
                report["slurm"] = slurm_act(NodeModule({}), node, report, memory, slurm_settings(config), hold=hold)
                write_atomic(options.state, json.dumps(memory, sort_keys=True) + "\n", 0o600)
            # Every command of the run that ran out of time, the checks' and Slurm's (scontrol, sinfo) alike.
            report["tool_timeouts"] = dict(NodeModule.timed_out)
            text = json.dumps(report, indent=2, sort_keys=True) + "\n"
            if not options.no_metrics:
                _write_outputs(config, report, text)
    except Exception as exc:  # noqa: BLE001 - whatever breaks, the report and the metrics say the check could not run
        report = _broken_report(exc, started)
        text = json.dumps(report, indent=2, sort_keys=True) + "\n"
        if not options.no_metrics:
            try:
                _write_outputs(config, report, text)
            except Exception as again:  # noqa: BLE001 - nothing more can be said than the line below
                _say(f"fabric: error: cannot write the report or metrics: {again}", True)
    if options.json == "-":
        sys.stdout.write(text)
    elif options.json:
        write_atomic(options.json, text, 0o600)
    line = report["reason"] or f"all {report['summary']['total']} checks passed or skipped"
    slurm = report.get("slurm")
    if slurm and slurm.get("held_until"):
        line += f"; Slurm: left alone while {slurm['held_by']} changes the node"
    if slurm and slurm.get("action"):
        line += f"; Slurm: {slurm['action']} {slurm['node']}" + (
            f" failed: {slurm['error']}" if "error" in slurm else ""
        )
    status = exit_status(report)
    _say(f"fabric: {report['status']}: {line}", status != EXIT_PASSED or options.json == "-")
    return status


def _write_outputs(config, report, text):
    write_atomic(config["report"], text, 0o600)
    if config["textfile_dir"]:
        write_atomic(os.path.join(config["textfile_dir"], METRICS_FILE), metrics(report), 0o644)


def config_errors(config):
    """What makes the node check's configuration unusable (a value of the wrong type), or None."""
    wrong = [
        f"{key} should be {kind.__name__}, not {type(config.get(key)).__name__}"
        for key, kind in (("textfile_dir", str), ("report", str), ("only", list), ("skip", list), ("slurm", bool))
        if not isinstance(config.get(key), kind)
    ]
    for key in ("interval", "slurm_drain_after", "slurm_resume_after", "slurm_max_drained"):
        value = config.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            wrong.append(f"{key} should be a number above 0, not {value!r}")
    if not isinstance(config.get("slurm_node"), str):
        wrong.append(f"slurm_node should be str, not {type(config.get('slurm_node')).__name__}")
    return "; ".join(wrong) or None
