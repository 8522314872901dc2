# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Tenant isolation read back from the fabric: which P_Keys each channel adapter port holds (``smpquery pkeys``
over the ports ``ibnetdiscover -p`` finds), against what the intent's partitions (opensm_partitions.partition_list,
the model partitions.conf is rendered from) say each port must hold.

A partition's member is ``0x<port GUID>`` with membership ``full``, ``limited`` or ``both``, or one of OpenSM's
words ``ALL``, ``ALL_CAS``, ``ALL_SWITCHES``, ``ALL_ROUTERS`` or ``SELF`` (the subnet manager's own port; OpenSM's
doc/partition-config.txt). A full member holds the P_Key with bit 15 set, a limited member without it, ``both`` holds
the two. Standard library only (Python 3.8 targets): the node check runs it on a subnet manager.
"""

import re

from .opensm_partitions import normalize_port_guid

FULL_BIT = 0x8000
_HEX = re.compile(r"0x[0-9a-fA-F]+")


def port_guid(text):
    """A port GUID as partitions.conf and ibnetdiscover write it (normalize_port_guid), also from the short hex
    sminfo prints (``0x2c90300a00001``)."""
    return normalize_port_guid(f"{int(str(text), 16):016x}")


def wanted_pkeys(partitions, guid, self_guid=None):
    """{P_Key value (with the membership bit): partition name} that channel adapter port ``guid`` must hold."""
    wanted = {}
    for partition in partitions:
        if partition["pkey"] is None:
            continue
        # A port named more than once (ALL and its GUID, say) holds the widest: full over limited, both for both.
        memberships = [
            membership
            for member, membership in partition["members"]
            if member == guid or member in ("ALL", "ALL_CAS") or (member == "SELF" and guid == self_guid)
        ]
        if not memberships:
            continue
        kinds = set()
        for membership in memberships:
            kinds.update(("full", "limited") if membership == "both" else (membership,))
        if "full" in kinds and "both" not in memberships:
            kinds.discard("limited")  # full wins where a port is listed limited and full (no both P_Keys)
        for kind in kinds:
            wanted[partition["pkey"] | (FULL_BIT if kind == "full" else 0)] = partition["name"]
    return wanted


def parse_ca_ports(text):
    """[{lid, port, guid, description}] of the channel adapter ports in ``ibnetdiscover -p`` output."""
    ports = []
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[0] == "CA" and fields[1].isdigit() and fields[2].isdigit():
            description = re.search(r"\(\s*'([^']*)'", line)
            ports.append(
                {
                    "lid": int(fields[1]),
                    "port": int(fields[2]),
                    "guid": port_guid(fields[3]),
                    "description": description.group(1) if description else "",
                }
            )
    unique = {(p["guid"], p["port"]): p for p in ports}  # a port with two links is listed once per link
    return sorted(unique.values(), key=lambda p: p["lid"])


def parse_pkey_table(text):
    """The valid P_Keys of ``smpquery pkeys`` output (entries whose low 15 bits are not 0), in table order."""
    values = []
    for line in (text or "").splitlines():
        head, colon, rest = line.partition(":")
        if colon and head.strip().isdigit():
            values += [int(token, 16) for token in _HEX.findall(rest) if int(token, 16) & 0x7FFF]
    return values


def describe(pkey, names):
    """``0x8101 (training, full)``."""
    kind = "full" if pkey & FULL_BIT else "limited"
    name = names.get(pkey & 0x7FFF)
    return f"{pkey:#06x} ({name}, {kind})" if name else f"{pkey:#06x} ({kind}; no partition has it)"
