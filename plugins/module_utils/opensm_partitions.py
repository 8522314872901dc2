# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Port GUIDs, P_Keys and OpenSM partitions.conf: validation and rendering as pure functions.

The inventory contract (see roles/opensm/README.md):

* ``fabric_port_guids`` (host var): the host's HCA port GUIDs in any pasted form;
* ``opensm_partitions`` (group var): ``[{name, pkey, ipoib, mtu, rate, sl, members: [{group|host|guid, membership}]}]``;
* ``opensm_default_partition``: how the always-written ``Default`` (0x7fff) line looks;
* ``fabric_interfaces`` (host var, owned by role fabric_interfaces): IPoIB MTUs cross-checked here.

Every problem is reported as one string naming the host, the variable, the value and the fix, so that the role's
preflight can print them all at once. Nothing here imports Ansible: the same code serves filters, modules and tests.
"""

import re

from .fabric_model import (
    DEFAULT_PKEY,
    IPOIB_MODES,
    PKEY_MAX,
    PKEY_MIN,
    ib_mtu_code,
    interface_partition,
    ipoib_partition_limit,
    is_int,
    normalise_interface,
    parse_int,
    partition_ipoib,
    partition_mtu_bytes,
    pkey_base,
)

MEMBERSHIPS = ("full", "limited", "both")
# OpenSM stores the name in char[32] (osm_partition.h); ',', '=', ':', ';' and '#' are its syntax.
PARTITION_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,30}$")
# IBTA rate codes (OpenSM ib_types.h IB_PATH_RECORD_RATE_*), keyed by Gb/s: what partitions.conf `rate=` takes.
IB_RATE_CODES = {
    2.5: 2,
    10: 3,
    30: 4,
    5: 5,
    20: 6,
    40: 7,
    60: 8,
    80: 9,
    120: 10,
    14: 11,
    56: 12,
    112: 13,
    168: 14,
    25: 15,
    100: 16,
    200: 17,
    300: 18,
    28: 19,
    50: 20,
    400: 21,
    600: 22,
}

PARTITION_KEYS = frozenset(("name", "pkey", "ipoib", "mtu", "rate", "sl", "members"))
DEFAULT_PARTITION_KEYS = frozenset(("membership", "ipoib", "mtu", "rate", "sl", "full_members"))
MEMBER_SELECTORS = ("group", "host", "guid")

_GUID_HEX_RE = re.compile(r"^[0-9a-f]{16}$")
GUID_FIX = "write 16 hex digits, e.g. 0x0002c903000a1b2c or 0002:c903:000a:1b2c ('ibstat -p' prints them)"


class PartitionError(ValueError):
    """Raised with every problem found, one per line, when rendering is asked for invalid input."""

    def __init__(self, errors):
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


def normalize_port_guid(value):
    """Return ``0x`` + 16 lowercase hex digits for a port GUID in any common pasted form.

    Accepted: ``0x0002c903000a1b2c``, ``0002c903000a1b2c``, ``0002:c903:000a:1b2c`` (ibstat/GID style), any case,
    surrounding blanks. Rejected with ValueError: anything else, including integers (YAML turns an unquoted
    ``0x...`` into an int, which loses nothing, but a decimal int is almost always a paste mistake) and the zero GUID.
    """
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError("not a string (quote GUIDs in YAML)")
    text = value.strip().lower()
    if text.startswith("0x"):
        text = text[2:]
    if ":" in text:
        groups = text.split(":")
        if len(groups) != 4 or any(len(g) != 4 for g in groups):
            raise ValueError("colon form needs four groups of 4 hex digits")
        text = "".join(groups)
    if not _GUID_HEX_RE.match(text):
        raise ValueError("needs exactly 16 hex digits")
    if int(text, 16) == 0:
        raise ValueError("the zero GUID is not a port GUID")
    return "0x" + text


def rate_gbps_to_code(rate):
    """Link rate in Gb/s (10, 25, 56, 100, 200, 400, ...) -> IBTA rate code. ValueError for unknown rates."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate not in IB_RATE_CODES:
        choices = ", ".join(_fmt_num(r) for r in sorted(IB_RATE_CODES))
        raise ValueError(f"rate must be one of {choices} (Gb/s)")
    return IB_RATE_CODES[rate]


def _fmt_num(number):
    return f"{number:g}" if isinstance(number, float) else str(number)


def _fmt_value(value):
    return f"{value:#06x}" if isinstance(value, int) and not isinstance(value, bool) else repr(value)


def collect_port_guids(hostvars, hosts):
    """Normalise every host's ``fabric_port_guids``; report bad syntax and GUIDs claimed twice.

    Returns ``(guids_by_host, owner_by_guid, errors)``: guids_by_host maps host -> ordered normalised GUIDs (bad
    entries dropped), owner_by_guid maps GUID -> host (first owner in inventory order).
    """
    guids_by_host = {}
    owner_by_guid = {}
    where_by_guid = {}
    errors = []
    for host in hosts:
        raw = (hostvars.get(host) or {}).get("fabric_port_guids")
        guids_by_host[host] = []
        if raw is None:
            continue
        if isinstance(raw, (str, bytes)) or not isinstance(raw, (list, tuple)):
            errors.append(
                f"{host}: fabric_port_guids={raw!r} is not a list; write a YAML list of port GUIDs, one per HCA port"
            )
            continue
        for index, value in enumerate(raw):
            try:
                guid = normalize_port_guid(value)
            except ValueError as exc:
                errors.append(f"{host}: fabric_port_guids[{index}]={value!r} is not a port GUID ({exc}); {GUID_FIX}")
                continue
            if guid in owner_by_guid:
                other, other_index = where_by_guid[guid]
                if other == host:
                    errors.append(
                        f"{host}: fabric_port_guids[{index}]={guid} repeats fabric_port_guids[{other_index}]; "
                        "list each port once"
                    )
                else:
                    errors.append(
                        f"{host}: fabric_port_guids[{index}]={guid} is also listed by host {other} "
                        f"(fabric_port_guids[{other_index}]); a port GUID belongs to one host: remove it where it is "
                        "wrong ('ibstat -p' on each host)"
                    )
                continue
            owner_by_guid[guid] = host
            where_by_guid[guid] = (host, index)
            guids_by_host[host].append(guid)
    return guids_by_host, owner_by_guid, errors


def _check_ipoib_flags(item, var, where, errors):
    """Validate ipoib/mtu/rate/sl of a partition (or of the Default partition). Returns the rendered flags."""
    flags = []
    try:
        ipoib = partition_ipoib(item)
    except ValueError:
        errors.append(f"{where}: {var}.ipoib={item.get('ipoib')!r} is not a boolean; write true or false")
        ipoib = False
    if ipoib:
        flags.append("ipoib")
    for key, convert, unit, fix in (
        ("mtu", ib_mtu_code, "mtu", "use the IB MTU in bytes, e.g. 4096 (IPoIB datagram MTU 4092)"),
        ("rate", rate_gbps_to_code, "rate", "use the broadcast group rate in Gb/s, e.g. 100, or leave it out"),
    ):
        if item.get(key) is None:
            continue
        if not ipoib:
            errors.append(
                f"{where}: {var}.{key}={item[key]!r} only applies to the IPoIB broadcast group; "
                f"set {var}.ipoib: true or remove {key}"
            )
            continue
        try:
            flags.append(f"{unit}={convert(item[key])}")
        except ValueError as exc:
            errors.append(f"{where}: {var}.{key}={item[key]!r} is invalid ({exc}); {fix}")
    sl = item.get("sl")
    if sl is not None:
        try:
            level = parse_int(sl)
        except ValueError:
            level = None
        if level is None or not 0 <= level <= 15:
            errors.append(f"{where}: {var}.sl={sl!r} is not a service level; use 0-15 or leave it out")
        else:
            flags.append(f"sl={level}")
    return flags


def _resolve_members(members, var, where, ctx, errors, owner="Default"):
    """Expand member selectors into an ordered {guid: membership} dict; report unknown names, empty groups and
    conflicts. ``owner``: the partition's name, for the messages."""
    resolved = {}
    origin = {}
    if members is None:
        members = []
    if not isinstance(members, (list, tuple)):
        errors.append(f"{where}: {var}={members!r} is not a list; write a list of {{group|host|guid, membership}}")
        return resolved
    for index, member in enumerate(members):
        mvar = f"{var}[{index}]"
        if not isinstance(member, dict):
            errors.append(
                f"{where}: {mvar}={member!r} is not a mapping; write e.g. {{group: gpu_nodes, membership: full}}"
            )
            continue
        unknown = sorted(set(member) - set(MEMBER_SELECTORS) - {"membership"})
        if unknown:
            errors.append(
                f"{where}: {mvar} has unknown key(s) {', '.join(unknown)}; allowed: group, host, guid, membership"
            )
        selectors = [key for key in MEMBER_SELECTORS if key in member]
        if len(selectors) != 1:
            errors.append(
                f"{where}: {mvar}={member!r} must name exactly one of group, host or guid; "
                "split it into one member per selector"
            )
            continue
        membership = member.get("membership", ctx["default_membership"])
        if membership not in MEMBERSHIPS:
            errors.append(f"{where}: {mvar}.membership={membership!r} is not a membership; use full, limited or both")
            continue
        selector = selectors[0]
        value = member[selector]
        label = f"{selector} {value}"
        guids = []
        if selector == "guid":
            try:
                guids = [normalize_port_guid(value)]
            except ValueError as exc:
                errors.append(f"{where}: {mvar}.guid={value!r} is not a port GUID ({exc}); {GUID_FIX}")
                continue
        else:
            if selector == "group":
                if value not in ctx["groups"]:
                    known = ", ".join(sorted(g for g in ctx["groups"] if g != "ungrouped"))
                    errors.append(
                        f"{where}: {mvar}.group={value!r} is not an inventory group; add the group or fix the name "
                        f"(known: {known})"
                    )
                    continue
                hosts = ctx["groups"][value]
                if not hosts:
                    errors.append(
                        f"{where}: {mvar}.group={value!r} is an empty inventory group, so it gives partition {owner} "
                        f"no port; add the hosts to group {value}, name the group they are in, or remove this member"
                    )
                    continue
            else:
                if value not in ctx["guids_by_host"]:
                    errors.append(
                        f"{where}: {mvar}.host={value!r} is not an inventory host; add the host or fix the name"
                    )
                    continue
                hosts = [value]
            for host in hosts:
                host_guids = ctx["guids_by_host"].get(host, [])
                if not host_guids and host not in ctx["hosts_with_bad_guids"]:
                    errors.append(
                        f"{where}: {mvar} ({label}) includes host {host}, which has no fabric_port_guids; "
                        f"list its port GUIDs ('ibstat -p') or take it out of the {selector}"
                    )
                guids.extend(host_guids)
        for guid in guids:
            previous = resolved.get(guid)
            if previous is not None and previous != membership:
                errors.append(
                    f"{where}: {mvar} ({label}) gives port {guid} membership {membership} but {origin[guid]} "
                    f"already gave it {previous}; use membership both for both, or remove one"
                )
                continue
            resolved[guid] = membership
            origin[guid] = f"{mvar} ({label})"
    return resolved


def resolve_partitions(partitions, hostvars, groups, default_partition=None, host="localhost"):
    """Validate the inventory and expand it into a fabric model.

    Returns ``(model, errors)``. model = {"default": {...}, "partitions": [{name, pkey, flags, members}],
    "allow_both_pkeys": bool, "guids_by_host": {...}}. errors is a list of messages (empty when valid); ``host`` is
    the host on whose behalf the check runs and prefixes messages about group variables.
    """
    all_hosts = list(groups.get("all", [])) if groups else []
    for name in hostvars:
        if name not in all_hosts:
            all_hosts.append(name)
    guids_by_host, _owners, errors = collect_port_guids(hostvars, all_hosts)
    hosts_with_bad_guids = {msg.split(":", 1)[0] for msg in errors}
    ctx = {
        "groups": groups or {},
        "guids_by_host": guids_by_host,
        "hosts_with_bad_guids": hosts_with_bad_guids,
        "default_membership": None,
    }

    default_partition = {} if default_partition is None else default_partition
    default_out = {"membership": "full", "flags": [], "full_members": {}}
    dvar = "opensm_default_partition"
    if not isinstance(default_partition, dict):
        errors.append(
            f"{host}: {dvar}={default_partition!r} is not a mapping; "
            "write e.g. {membership: full, ipoib: true, mtu: 4096}"
        )
    else:
        unknown = sorted(set(default_partition) - DEFAULT_PARTITION_KEYS)
        if unknown:
            errors.append(
                f"{host}: {dvar} has unknown key(s) {', '.join(unknown)}; "
                f"allowed: {', '.join(sorted(DEFAULT_PARTITION_KEYS))}"
            )
        membership = default_partition.get("membership", "full")
        if membership not in ("full", "limited"):
            errors.append(
                f"{host}: {dvar}.membership={membership!r} is not a Default policy; use full (every port talks to "
                "every port) or limited (ports reach only full members: switches, the SM and full_members)"
            )
        default_out["membership"] = membership
        default_out["flags"] = _check_ipoib_flags(default_partition, dvar, host, errors)
        default_out["ipoib"] = "ipoib" in default_out["flags"]
        default_out["mtu"] = default_partition.get("mtu")
        ctx["default_membership"] = "full"
        full_members = _resolve_members(
            default_partition.get("full_members"), dvar + ".full_members", host, ctx, errors
        )
        for guid, member_ship in full_members.items():
            if member_ship != "full":
                errors.append(
                    f"{host}: {dvar}.full_members gives {guid} membership {member_ship}; Default full_members are "
                    "full members, drop membership there"
                )
        default_out["full_members"] = full_members
    ctx["default_membership"] = None

    out = []
    pvar = "opensm_partitions"
    if partitions is None:
        partitions = []
    if not isinstance(partitions, (list, tuple)):
        errors.append(f"{host}: {pvar}={partitions!r} is not a list; write a list of partitions")
        partitions = []
    seen_pkeys = {}
    seen_names = {}
    for index, part in enumerate(partitions):
        var = f"{pvar}[{index}]"
        if not isinstance(part, dict):
            errors.append(f"{host}: {var}={part!r} is not a mapping; write {{name, pkey, members, ...}}")
            continue
        unknown = sorted(set(part) - PARTITION_KEYS)
        if unknown:
            errors.append(
                f"{host}: {var} has unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(PARTITION_KEYS))}"
            )
        name = part.get("name")
        if not isinstance(name, str) or not PARTITION_NAME_RE.match(name):
            errors.append(
                f"{host}: {var}.name={name!r} is not a partition name; use 1-31 characters of letters, digits, "
                "'_', '.', '+', '-' starting with a letter or digit (OpenSM treats , = : ; # as syntax)"
            )
        elif name.lower() == "default":
            errors.append(
                f"{host}: {var}.name={name!r} is reserved for the Default partition (0x7fff); configure it with "
                "opensm_default_partition and rename this one"
            )
        elif name in seen_names:
            errors.append(
                f"{host}: {var}.name={name!r} is already used by {pvar}[{seen_names[name]}]; "
                "give each partition its own name"
            )
        else:
            seen_names[name] = index
        pkey = None
        try:
            raw_pkey = part.get("pkey")
            if raw_pkey is None:
                raise ValueError("missing")
            pkey = pkey_base(raw_pkey)
            if not PKEY_MIN <= pkey <= PKEY_MAX:
                raise ValueError(
                    f"its low 15 bits are {pkey:#06x}; 0x0000 is invalid and 0x7fff is the Default partition"
                )
        except ValueError as exc:
            errors.append(
                f"{host}: {var}.pkey={_fmt_value(part.get('pkey'))} is not a usable P_Key ({exc}); "
                "pick an unused value in 0x0001-0x7ffe"
            )
            pkey = None
        if pkey is not None:
            if pkey in seen_pkeys:
                errors.append(
                    f"{host}: {var}.pkey={_fmt_value(part['pkey'])} has the same low 15 bits ({pkey:#06x}) as "
                    f"{pvar}[{seen_pkeys[pkey]}].pkey; OpenSM would merge them: pick an unused value in 0x0001-0x7ffe"
                )
            else:
                seen_pkeys[pkey] = index
        flags = _check_ipoib_flags(part, var, host, errors)
        members = {}
        if part.get("members") in (None, [], ()):
            what = "missing" if "members" not in part else f"members: {'null' if part['members'] is None else '[]'}"
            errors.append(
                f"{host}: {var} has no members ({what}); list at least one {{group|host|guid, membership}} entry. "
                "OpenSM puts a P_Key only into its members' ports, so a partition without members does nothing: "
                "leave it out of opensm_partitions until it has one"
            )
        else:
            members = _resolve_members(part["members"], var + ".members", host, ctx, errors, owner=name)
        out.append(
            {
                "name": name,
                "pkey": pkey,
                "ipoib": "ipoib" in flags,
                "mtu": part.get("mtu"),
                "flags": flags,
                "members": members,
            }
        )
    model = {
        "default": default_out,
        "partitions": out,
        "allow_both_pkeys": any(m == "both" for p in out for m in p["members"].values()),
        "guids_by_host": guids_by_host,
    }
    return model, errors


def ipoib_mtu_errors(model, hostvars, hosts=None):
    """Cross-check ``fabric_interfaces`` IPoIB MTUs (defaults included) against the partitions' broadcast-group MTU.

    An IPoIB interface with P_Key suffix (``ib0.8101``) or a ``pkey`` key belongs to that partition, any other to the
    Default partition (``fabric_model.interface_partition``). In datagram mode its MTU can be at most the group's IB
    MTU minus 4; connected mode is not limited by the group for unicast and is not checked
    (``fabric_model.ipoib_partition_limit``). Only hosts that are members of the partition are checked; malformed
    entries are left to role fabric_interfaces, which reports them.
    """
    errors = []
    by_pkey = {DEFAULT_PKEY: ("opensm_default_partition", model["default"], None)}
    for index, part in enumerate(model["partitions"]):
        if part["pkey"] is not None:
            by_pkey[part["pkey"]] = (f"opensm_partitions[{index}]", part, set(part["members"]))
    hosts = list(model["guids_by_host"]) if hosts is None else hosts
    for host in hosts:
        interfaces = (hostvars.get(host) or {}).get("fabric_interfaces") or []
        if not isinstance(interfaces, (list, tuple)):
            continue
        host_guids = set(model["guids_by_host"].get(host, []))
        for index, raw in enumerate(interfaces):
            if not isinstance(raw, dict) or raw.get("kind") != "ipoib":
                continue
            iface = normalise_interface(raw)
            if iface["mode"] not in IPOIB_MODES or not is_int(iface["mtu"]):
                continue
            try:
                pkey = interface_partition(iface)
            except ValueError:
                continue
            if pkey not in by_pkey:
                continue
            pvar, part, members = by_pkey[pkey]
            if members is not None and not host_guids & members:
                continue
            if not part.get("ipoib"):
                errors.append(
                    f"{host}: fabric_interfaces[{index}] ({iface.get('name')}) is IPoIB on P_Key {pkey:#06x} but "
                    f"{pvar} has ipoib off, so OpenSM creates no broadcast group; set {pvar}.ipoib: true"
                )
                continue
            try:
                limit = ipoib_partition_limit(iface["mode"], part.get("mtu"))
            except ValueError:
                continue
            if limit is not None and iface["mtu"] > limit:
                group_mtu = partition_mtu_bytes(part.get("mtu"))
                errors.append(
                    f"{host}: fabric_interfaces[{index}].mtu={iface['mtu']} ({iface.get('name')}, datagram) is above "
                    f"{limit}, the most the IPoIB broadcast group of {pvar} (mtu {group_mtu}) allows; set "
                    f"{pvar}.mtu: 4096 if every port runs 4K MTU, or lower the interface MTU to {limit}"
                )
    return errors


def partition_errors(partitions, hostvars, groups, default_partition=None, host="localhost"):
    """Every problem of the partition inventory: ``resolve_partitions``, then (when that found none) the IPoIB MTU
    cross-check. Returns ``(model, errors)``; the model's ``guids_by_host`` is usable even when there are errors."""
    model, errors = resolve_partitions(partitions, hostvars, groups, default_partition, host)
    if not errors:
        errors = ipoib_mtu_errors(model, hostvars)
    return model, errors


def _member_lines(members):
    return [f"{guid}={membership}" for guid, membership in sorted(members.items())]


def _statement(head, members):
    """One partition statement: header line, then one member per line, ';' closing the last member's line.

    OpenSM reads partitions.conf with a 4096-byte line buffer, so long member lists must be split over lines; a
    statement runs until ';'. A lone ';' line is a parse error in OpenSM 3.3 (which then falls back to its
    built-in Default partition), so the ';' always follows the last member.
    """
    lines = [head + " :"]
    lines.extend("  " + member for member in members)
    lines[-1] += " ;"
    return lines


def render_partitions_conf(model, header=""):
    """Render partitions.conf text from a model returned by resolve_partitions (which must have had no errors).

    Members are sorted so the file is stable whatever the inventory order; resolve_partitions refuses a partition
    without members, so every partition here has at least one.
    """
    lines = [header.rstrip("\n")] if header else []
    default = model["default"]
    body = ["ALL=full"] if default["membership"] == "full" else ["ALL=limited", "ALL_SWITCHES=full", "SELF=full"]
    body += _member_lines(dict.fromkeys(default["full_members"], "full"))
    lines += _statement(", ".join(["Default=0x7fff"] + default["flags"]), body)
    for part in model["partitions"]:
        lines.append("")
        head = ", ".join([f"{part['name']}={part['pkey']:#06x}"] + part["flags"])
        lines += _statement(head, _member_lines(part["members"]))
    return "\n".join(lines) + "\n"


def partition_list(model):
    """The partitions of a resolve_partitions model as OpenSM reads them from render_partitions_conf's text, Default
    first: [{name, pkey (15 bits), members: [[member, membership]]}], a member being an ALL-style word or a port GUID.
    The host's intent carries it, and the node check judges the fabric's P_Key tables against it."""
    default = model["default"]
    if default["membership"] == "full":
        members = [["ALL", "full"]]
    else:
        members = [["ALL", "limited"], ["ALL_SWITCHES", "full"], ["SELF", "full"]]
    members += [[guid, "full"] for guid in sorted(dict.fromkeys(default["full_members"]))]
    listed = [{"name": "Default", "pkey": 0x7FFF, "members": members}]
    for part in model["partitions"]:
        members = [[guid, membership] for guid, membership in sorted(part["members"].items())]
        listed.append({"name": part["name"], "pkey": part["pkey"] & 0x7FFF, "members": members})
    return listed


def partitions_conf(partitions, hostvars, groups, default_partition=None, host="localhost", header=""):
    """Validate and render in one step; raises PartitionError listing every problem."""
    model, errors = resolve_partitions(partitions, hostvars, groups, default_partition, host)
    if errors:
        raise PartitionError(errors)
    return render_partitions_conf(model, header)
