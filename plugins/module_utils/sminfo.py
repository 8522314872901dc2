# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Read what ``sminfo`` (infiniband-diags) printed: which subnet manager answered for a port, and in which state.

Pure functions, no Ansible imports: unit-tested on output of real OpenSM on the ibsim lab fabric. sminfo sends an
SMInfo query (SubnGet) to the SM LID of the local port and prints one line (infiniband-diags/sminfo.c):

    sminfo: sm lid 1 sm guid 0x2c903000a1b2c, activity count 210 priority 0 state 3 SMINFO_MASTER

Without an answer it exits non-zero with ``sminfo: iberror: failed: query`` on stderr; an SM LID it cannot use gives
``can't resolve sm port``, a port it cannot open ``Failed to open '<ca>' port '<n>'``.
"""

import re

SM_STATES = ("SMINFO_NOTACT", "SMINFO_DISCOVER", "SMINFO_STANDBY", "SMINFO_MASTER")
MASTER = 3

_LINE_RE = re.compile(
    r"sminfo: sm lid (?P<lid>\d+) sm guid (?P<guid>0x[0-9a-fA-F]+), activity count (?P<activity>\d+) "
    r"priority (?P<priority>\d+) state (?P<state>\d+) (?P<state_name>\S+)"
)
# rc of `timeout <s> sminfo ...`: killed on time, or sminfo not found / not executable.
TIMEOUT_RC = 124
NOT_FOUND_RC = (126, 127)
# Messages that say the query was never sent from this host (no umad device, no access): not the SM's fault.
_CANNOT_QUERY_RE = re.compile(r"Failed to open|can't open UMAD port|umad_init|Permission denied|No such device")
# No SM LID to send the query to (the port has not been swept by any SM).
_NO_SM_LID_RE = re.compile(r"can't resolve sm port")


def parse_sminfo(text):
    """{lid, guid, activity_count, priority, state, state_name} from sminfo's line, or None when there is none.

    state_name is sminfo's own name for the state (``???`` for a value outside 0-3); guid is as printed
    (lower-case hex without leading zeros)."""
    match = _LINE_RE.search(text or "")
    if not match:
        return None
    state = int(match.group("state"))
    return {
        "lid": int(match.group("lid")),
        "guid": match.group("guid").lower(),
        "activity_count": int(match.group("activity")),
        "priority": int(match.group("priority")),
        "state": state,
        "state_name": match.group("state_name"),
        "master": state == MASTER,
    }


def sminfo_outcome(rc, stdout, stderr):
    """What one run of ``timeout <s> sminfo -C <ca> -P <port>`` says, as (kind, detail).

    kind: ``answered`` (detail: parse_sminfo's dict), ``not_installed``, ``cannot_query`` (the query could not be
    sent from this host, or rc None: the query host was not reached), ``no_sm_lid``, ``timeout`` or ``no_answer``
    (detail: sminfo's iberror line, else the last line it printed, or '')."""
    parsed = parse_sminfo(stdout) if rc == 0 else None
    if parsed:
        return "answered", parsed
    lines = [line.strip() for line in f"{stdout or ''}\n{stderr or ''}".splitlines() if line.strip()]
    # sminfo's own verdict ("sminfo: iberror: failed: query") rather than libibmad's warning before it.
    verdicts = [line for line in lines if "iberror" in line]
    detail = (verdicts or lines or [""])[-1]
    text = "\n".join(lines)
    if rc is None:  # no run: the query host was not reached
        return "cannot_query", detail
    if rc in NOT_FOUND_RC:
        return "not_installed", detail
    if rc == TIMEOUT_RC:
        return "timeout", detail
    if _NO_SM_LID_RE.search(text):
        return "no_sm_lid", detail
    if _CANNOT_QUERY_RE.search(text):
        return "cannot_query", detail
    return "no_answer", detail


def infiniband_port(port):
    """InfiniBand link layer (ibsim's simulated sysfs has no link_layer file: its ports are InfiniBand too)."""
    return port.get("link_layer") in (None, "InfiniBand")


def query_ports(ib):
    """[{device, port}]: the ports whose subnet manager is asked - InfiniBand, LinkUp, with an SM LID (``ib`` as
    fabric_probe's probe_rdma returns it). A port without an SM LID is failed without asking; a RoCE port has no
    subnet manager."""
    return [
        {"device": device["name"], "port": port["port"]}
        for device in (ib or {}).get("devices") or []
        for port in device.get("ports") or []
        if infiniband_port(port) and port.get("phys_state") == "LinkUp" and port.get("sm_lid")
    ]


def query_all(run, ib, timeout, environment=None):
    """sminfo for each of ``query_ports(ib)``, on this host, each under ``timeout`` seconds: one result per port
    in the shape of a registered command loop's (``item``, ``rc``, ``stdout``, ``stderr``), which the report reads
    either way. ``run(argv, environment)`` returns (rc, stdout, stderr)."""
    results = []
    for item in query_ports(ib):
        argv = ["timeout", str(timeout), "sminfo", "-C", str(item["device"]), "-P", str(item["port"])]
        rc, stdout, stderr = run(argv, dict(environment or {}))
        results.append({"item": item, "rc": rc, "stdout": stdout, "stderr": stderr})
    return results
