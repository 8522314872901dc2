# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Tenant isolation, judged from what the fabric's ports hold (fabric_isolation reads it on a subnet manager): each
channel adapter port holds exactly the P_Keys its partitions give it, with the right membership bit
(``partition.port[<GUID>]``), and each partition is held by its members only (``partition[<name>]``).
"""

from ..fabric_isolation import describe, wanted_pkeys
from .record import _check


def isolation_checks(host, partitions, ports, self_guid=None):
    """``ports``: [{guid, lid, description, pkeys (list, or None when the table could not be read), error}] of every
    channel adapter port found; ``partitions``: the intent's partition list (opensm_partitions.partition_list);
    ``self_guid``: the master subnet manager's port (member ``SELF``)."""
    names = {p["pkey"]: p["name"] for p in partitions if p["pkey"] is not None}
    checks, holders, unread, wanted_by = [], {}, [], {}
    for port in ports:
        name = f"partition.port[{port['guid']}]"
        subject = f"{port['guid']} ({port['description'] or 'LID ' + str(port['lid'])})"
        if port.get("pkeys") is None:
            # Fail closed: a port whose table cannot be read may hold any partition.
            unread.append(port["guid"])
            message = (
                f"the P_Key table of {subject} could not be read ({port.get('error') or 'no answer'}): its isolation "
                "cannot be confirmed; see whether the port answers (smpquery pkeys <LID>)"
            )
            checks.append(_check(host, "health", name, "failed", message))
            continue
        held = set(port["pkeys"])
        for pkey in held:
            holders.setdefault(pkey & 0x7FFF, {})[port["guid"]] = pkey
        wanted = wanted_by[port["guid"]] = wanted_pkeys(partitions, port["guid"], self_guid)
        extra = sorted(held - set(wanted))
        missing = sorted(set(wanted) - held)
        shown = ", ".join(describe(p, names) for p in sorted(held)) or "none"
        said = []
        if extra:
            said.append(f"holds {', '.join(describe(p, names) for p in extra)}, which its partitions do not give it")
        if missing:
            said.append(f"lacks {', '.join(describe(p, names) for p in missing)}")
        if said:
            status = "failed"
            message = (
                f"{subject}: {'; '.join(said)} (it holds {shown}): the fabric does not isolate it as partitions.conf "
                "says; read OpenSM's log, send it SIGHUP to apply partitions.conf again, and look for another SM"
            )
        else:
            status, message = "passed", f"{subject} holds {shown}, as partitions.conf says"
        checks.append(_check(host, "health", name, status, message, sorted(held), sorted(wanted)))
    for partition in partitions:
        if partition["pkey"] is None:
            continue
        pkey = partition["pkey"]
        name = f"partition[{partition['name']}]"
        members = {guid for guid, wanted in wanted_by.items() if pkey in {w & 0x7FFF for w in wanted}}
        held_by = holders.get(pkey, {})
        intruders = sorted(set(held_by) - members)
        absent = sorted(members - set(held_by))
        if intruders or absent or unread:
            said = []
            if intruders:
                said.append(f"held by {len(intruders)} port(s) that are not members: {', '.join(intruders)}")
            if absent:
                said.append(f"not held by {len(absent)} member port(s): {', '.join(absent)}")
            if unread:
                said.append(f"{len(unread)} port(s) could not be read, any of which may hold it: {', '.join(unread)}")
            message = f"{partition['name']} ({pkey:#06x}): {'; '.join(said)}"
            checks.append(_check(host, "health", name, "failed", message, len(held_by), len(members), "ports"))
        else:
            message = f"{partition['name']} ({pkey:#06x}) is held by its {len(members)} member port(s) only"
            checks.append(_check(host, "health", name, "passed", message, len(held_by), len(members), "ports"))
    return checks
