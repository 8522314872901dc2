# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""RoCE host QoS on a live host: read each setting, compare it with what is wanted, write only what differs.

Standard library only: module ``roce_qos`` imports this file, and role ``roce_qos`` installs the same file on the
host, where a systemd unit runs it at boot and after an RDMA device appears (a reboot or a driver reload would
otherwise return the host to lossy defaults), through roce_qos_boot.py, which gives it a bounded command runner.
What one run does is what the other does. Every command goes through the runner the caller gives (the module's
run_command, the boot script's subprocess, a test's fake).

Per interface (its ``settings`` already validated by roce_qos.qos_errors, ``ecn`` a bool):

- ``pfc``: the priorities with PFC on, through ``dcb pfc`` (iproute2's DCB tool);
- ``dscp_map``: the DSCP->priority table, through ``dcb app ... dscp-prio``. A NIC trusts DSCP while that table
  has entries: mlx5 switches its trust state to DSCP when the first entry is added and back to PCP when the last is
  deleted (drivers/net/ethernet/mellanox/mlx5/core/en_dcbnl.c, mlx5e_dcbnl_ieee_setapp/delapp), so trust ``pcp``
  means an empty table. Entries are added before stale ones are deleted, so the table is never empty on the way;
- ``ecn``: mlx5's per-priority switches /sys/class/net/<if>/ecn/roce_np|roce_rp/enable/<prio>, which the mlx5 driver
  of NVIDIA's MLNX_OFED/DOCA-OFED has (its documentation, "Explicit Congestion Notification (ECN)");
- ``tos``: RDMA-CM's default ToS of the interface's RDMA device and port, in configfs
  (Documentation/ABI/testing/configfs-rdma_cm), the ToS of every RDMA-CM connection that does not set its own.

A setting the device cannot take (no DCB on virtio or Soft-RoCE, no ECN switches outside mlx5, no RDMA device or no
rdma_cm configfs) is ``unsupported`` with the reason, never a silent success.
"""

import glob
import json
import os
import sys
import time

PRIORITIES = tuple(range(8))
SETTINGS = ("pfc", "dscp_map", "ecn", "tos")
# Per setting: ok (as wanted), changed (written; in check mode: would be), unsupported (with a reason).
OK, CHANGED, UNSUPPORTED = "ok", "changed", "unsupported"


def dcb_argv(interface, settings, current_map=None):
    """The ``dcb`` commands that make one interface's PFC and DSCP table what ``settings`` asks, given the table it
    has (``current_map``: {dscp: priority}). PFC's state is given for every priority; the table's wanted entries
    are replaced first (``dcb app replace`` removes a DSCP's other priority), stale ones deleted after."""
    pfc = set(settings["pfc_priorities"])
    commands = [
        ["dcb", "pfc", "set", "dev", interface, "prio-pfc", *(f"{p}:{'on' if p in pfc else 'off'}" for p in PRIORITIES)]
    ]
    wanted = wanted_map(settings)
    current = current_map or {}
    if wanted:
        pairs = [f"{dscp}:{prio}" for dscp, prio in sorted(wanted.items())]
        commands.append(["dcb", "app", "replace", "dev", interface, "dscp-prio", *pairs])
    # `replace` already moved a wanted DSCP that had another priority; what is left are DSCPs not wanted at all.
    stale = [f"{dscp}:{prio}" for dscp, prio in sorted(current.items()) if dscp not in wanted]
    if stale:
        commands.append(["dcb", "app", "del", "dev", interface, "dscp-prio", *stale])
    return commands


def wanted_map(settings):
    """{dscp: priority} the interface's table must hold: the map when it trusts DSCP, nothing when it trusts PCP."""
    if settings["trust"] != "dscp":
        return {}
    return {int(dscp): int(prio) for dscp, prio in settings["dscp_map"].items()}


def ecn_paths(interface, settings, sysfs_root="/"):
    """{path: "1" or "0"}: mlx5's ECN switches of one interface, notification point (roce_np) and reaction point
    (roce_rp) per priority, on for the PFC priorities when ECN is wanted, off for the others."""
    on = set(settings["pfc_priorities"]) if settings["ecn"] else set()
    base = ecn_dir(interface, sysfs_root)
    return {
        f"{base}/{point}/enable/{p}": "1" if p in on else "0" for point in ("roce_np", "roce_rp") for p in PRIORITIES
    }


def ecn_dir(interface, sysfs_root="/"):
    return f"{sysfs_root.rstrip('/')}/sys/class/net/{interface}/ecn"


def default_tos_path(device, port, configfs_root="/sys/kernel/config"):
    """RDMA-CM's per-port default ToS in configfs; the device's directory must be created (mkdir) first."""
    return f"{configfs_root.rstrip('/')}/rdma_cm/{device}/ports/{port}/default_roce_tos"


def parse_pfc(output):
    """The priorities with PFC on, from ``dcb -j pfc show dev <if>`` ({"prio_pfc": [false, ..., true, ...]})."""
    data = json.loads(output or "{}")
    return sorted(p for p, on in enumerate(data.get("prio_pfc") or []) if on)


def parse_dscp_map(output):
    """{dscp: priority} from ``dcb -j app show dev <if> dscp-prio`` ({"dscp_prio": [[26, 3], ...]}; no key when the
    table is empty)."""
    data = json.loads(output or "{}")
    return {int(dscp): int(prio) for dscp, prio in data.get("dscp_prio") or []}


def rdma_port_of(interface, sysfs_root="/"):
    """(device, port) of the RDMA port whose RoCE GIDs sit on ``interface``, or (None, None).

    /sys/class/infiniband/<dev>/ports/<port>/gid_attrs/ndevs/<index> names the netdev of each populated GID: the
    same for a ConnectX port and for a Soft-RoCE (rxe) device, whatever the device was named.
    """
    root = sysfs_root.rstrip("/")
    for path in sorted(glob.glob(f"{root}/sys/class/infiniband/*/ports/*/gid_attrs/ndevs/*")):
        try:
            with open(path, encoding="ascii") as handle:
                netdev = handle.read().strip()
        except OSError:  # an unpopulated GID index reads as EINVAL
            continue
        if netdev == interface:
            parts = path.split("/")
            return parts[-6], int(parts[-4])
    return None, None


class Host:
    """The host's side effects, in one place: commands, files, directories (tests give a root and a fake runner)."""

    def __init__(self, sysfs_root="/", configfs_root="/sys/kernel/config", run=None, check_mode=False):
        if run is None:
            raise TypeError("Host needs a command runner: run(argv) -> (rc, stdout, stderr)")
        self.sysfs_root = sysfs_root
        self.configfs_root = configfs_root
        self.check_mode = check_mode
        self._run = run

    def run(self, argv):
        return self._run(argv)

    @staticmethod
    def read(path):
        with open(path, encoding="ascii") as handle:
            return handle.read().strip()

    def write(self, path, value):
        if not self.check_mode:
            with open(path, "w", encoding="ascii") as handle:
                handle.write(f"{value}\n")

    def mkdir(self, path):
        if not self.check_mode:
            os.mkdir(path)


def module_runner(module):
    """A Host runner through an AnsibleModule's run_command, which fails the module on a missing program: ``dcb``
    is looked up first (iproute2 before 5.11, Debian 11 and Ubuntu 20.04, has none)."""
    dcb = module.get_bin_path("dcb")

    def run(argv):
        if argv[0] == "dcb":
            if not dcb:
                return 127, "", "dcb: not found"
            argv = [dcb, *argv[1:]]
        return module.run_command(argv, environ_update={"LC_ALL": "C"})

    return run


def _result(state, wanted, current=None, reason=None, commands=None):
    result = {"state": state, "wanted": wanted, "current": current}
    if reason:
        result["reason"] = reason
    if commands:
        result["commands"] = commands
    return result


def _dcb_unsupported(stderr, interface):
    message = (stderr or "").strip().splitlines()[-1:] or ["no output"]
    if "not found" in message[0]:
        return "dcb (iproute2 5.11 or newer) is not installed: install iproute2 from the distribution"
    return f"the driver of {interface} has no DCB support (dcb: {message[0]})"


def apply_dcb(host, interface, settings):
    """PFC and the DSCP table of one interface: {"pfc": result, "dscp_map": result}."""
    wanted_pfc = sorted(set(settings["pfc_priorities"]))
    wanted = wanted_map(settings)
    rc, out, err = host.run(["dcb", "-j", "pfc", "show", "dev", interface])
    if rc != 0:
        reason = _dcb_unsupported(err, interface)
        return {
            "pfc": _result(UNSUPPORTED, wanted_pfc, reason=reason),
            "dscp_map": _result(UNSUPPORTED, wanted, reason=reason),
        }
    current_pfc = parse_pfc(out)
    rc, out, err = host.run(["dcb", "-j", "app", "show", "dev", interface, "dscp-prio"])
    if rc != 0:
        reason = _dcb_unsupported(err, interface)
        current_map = None
    else:
        current_map = parse_dscp_map(out)
    commands = dcb_argv(interface, settings, current_map)
    results = {}
    pfc_commands = [c for c in commands if c[1] == "pfc"]
    if current_pfc == wanted_pfc:
        results["pfc"] = _result(OK, wanted_pfc, current_pfc)
    else:
        results["pfc"] = _result(CHANGED, wanted_pfc, current_pfc, commands=pfc_commands)
    if current_map is None:
        results["dscp_map"] = _result(UNSUPPORTED, wanted, reason=reason)
    elif current_map == wanted:
        results["dscp_map"] = _result(OK, wanted, current_map)
    else:
        results["dscp_map"] = _result(CHANGED, wanted, current_map, commands=[c for c in commands if c[1] == "app"])
    for name in ("pfc", "dscp_map"):
        for argv in results[name].get("commands", []) if not host.check_mode else []:
            rc, _out, err = host.run(argv)
            if rc != 0:
                raise QosError(f"{' '.join(argv)} failed ({rc}): {err.strip()}")
    return results


def apply_ecn(host, interface, settings):
    wanted_on = sorted(set(settings["pfc_priorities"])) if settings["ecn"] else []
    if not os.path.isdir(ecn_dir(interface, host.sysfs_root)):
        return _result(
            UNSUPPORTED,
            wanted_on,
            reason=f"the driver of {interface} exposes no ECN switches (sysfs ecn/roce_np, roce_rp: "
            "MLNX_OFED's mlx5 has them)",
        )
    current, writes = {}, {}
    for path, value in ecn_paths(interface, settings, host.sysfs_root).items():
        try:
            current[path] = host.read(path)
        except OSError as exc:
            return _result(UNSUPPORTED, wanted_on, reason=f"{path} cannot be read: {exc.strerror}")
        if current[path] != value:
            writes[path] = value
    current_on = sorted({int(p.rsplit("/", 1)[1]) for p, v in current.items() if v == "1"})
    if not writes:
        return _result(OK, wanted_on, current_on)
    for path, value in writes.items():
        host.write(path, value)
    return _result(CHANGED, wanted_on, current_on)


def apply_tos(host, interface, settings):
    wanted = int(settings["tos"])
    device, port = rdma_port_of(interface, host.sysfs_root)
    if device is None:
        return _result(UNSUPPORTED, wanted, reason=f"no RDMA device has a RoCE GID on {interface}")
    base = f"{host.configfs_root.rstrip('/')}/rdma_cm"
    if not os.path.isdir(base):
        return _result(
            UNSUPPORTED,
            wanted,
            reason=f"{base} is absent: load the rdma_cm module (role rdma_modules loads rdma_ucm, which needs it) "
            "and mount configfs",
        )
    where = f"{device}/{port}"
    path = default_tos_path(device, port, host.configfs_root)
    if not os.path.isdir(f"{base}/{device}"):
        # The directory is made on demand: until then RDMA-CM uses ToS 0 for the device.
        host.mkdir(f"{base}/{device}")
        if host.check_mode:
            return _result(CHANGED, wanted, 0, reason=f"{where}: rdma_cm has no configfs group yet (ToS 0)")
    current = int(host.read(path))
    if current == wanted:
        return _result(OK, wanted, current)
    host.write(path, wanted)
    return _result(CHANGED, wanted, current)


class QosError(Exception):
    pass


def apply_interface(host, interface, settings):
    """{setting: result} for one interface; a missing interface makes every setting unsupported."""
    if not os.path.isdir(f"{host.sysfs_root.rstrip('/')}/sys/class/net/{interface}"):
        reason = f"interface {interface} does not exist"
        return {name: _result(UNSUPPORTED, None, reason=reason) for name in SETTINGS}
    results = apply_dcb(host, interface, settings)
    results["ecn"] = apply_ecn(host, interface, settings)
    results["tos"] = apply_tos(host, interface, settings)
    device, port = rdma_port_of(interface, host.sysfs_root)
    results["rdma_port"] = f"{device}/{port}" if device else None
    return results


def apply_all(host, interfaces):
    """{interface: {setting: result}} for {interface: settings}."""
    return {name: apply_interface(host, name, settings) for name, settings in sorted(interfaces.items())}


def summary_lines(results):
    """One line per setting, for a log: '<if> <setting>: <state> (<reason>)'."""
    lines = []
    for name, settings in sorted(results.items()):
        for setting in SETTINGS:
            result = settings.get(setting) or {}
            reason = f" ({result['reason']})" if result.get("reason") else ""
            lines.append(f"{name} {setting}: {result.get('state')}{reason}")
    return lines


def _wait_for(interfaces, sysfs_root, seconds):
    """Wait until every interface exists and has an RDMA port, or until ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    while True:
        missing = [name for name in interfaces if rdma_port_of(name, sysfs_root)[0] is None]
        if not missing or time.monotonic() >= deadline:
            return missing
        time.sleep(1)


def _say(stream, line):
    """One line to the journal (the unit's standard output or error)."""
    stream.write(line + "\n")
    stream.flush()


def main(argv, run):
    """Boot-time run (roce_qos_boot.py, installed beside this file): argv is ``<config.json> [wait seconds]``, the
    config {"interfaces": {name: settings}} as the module wrote it; run(argv) runs a command. Returns 1 when a command
    fails, 0 otherwise (an unsupported setting is logged, as the role reports it)."""
    with open(argv[0], encoding="utf-8") as handle:
        config = json.load(handle)
    interfaces = config["interfaces"]
    missing = _wait_for(interfaces, "/", int(argv[1]) if len(argv) > 1 else 0)
    for name in missing:
        _say(sys.stdout, f"{name}: no RDMA port after waiting; applying what can be")
    try:
        results = apply_all(Host(run=run), interfaces)
    except QosError as exc:
        _say(sys.stderr, f"failed: {exc}")
        return 1
    for line in summary_lines(results):
        _say(sys.stdout, line)
    return 0
