# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Inventory validation of ``fabric_interfaces`` entries (IPoIB and RoCE) and of role fabric_interfaces' host-level
inputs, and the sysctls the role sets (multi-rail, neighbour-table sizing).

Pure functions only (no Ansible imports), importable on Python 3.8 targets and unit-tested with pytest. What a value
means (P_Keys, MTU defaults and arithmetic, the IPoIB/partition MTU rule) is defined in ``fabric_model``; this file
only judges an inventory against it and words the messages.
"""

import ipaddress
import re

from .fabric_link import (
    ARPHRD_ETHER,
    ARPHRD_INFINIBAND,
    link_type_name,
)
from .fabric_model import (
    DEFAULT_PKEY,
    INTERFACE_KEYS,
    IPOIB_MODES,
    KINDS,
    interface_name_pkey,
    interface_partition,
    ipoib_max_mtu,
    ipoib_partition_limit,
    is_int,
    normalise_interface,
    parse_bool,
    parse_int,
    parse_pkey,
    partition_ipoib,
    pkey_base,
    roce_active_mtu,
    roce_min_netdev_mtu,
)

# IPv4's minimum; below it the kernel refuses an address anyway.
MIN_NETDEV_MTU = 68
# The largest Ethernet MTU a ConnectX NIC accepts (mlx5 max_mtu); switches usually stop at 9216.
ROCE_MAX_NETDEV_MTU = 9978

# Linux: IFNAMSIZ - 1 characters, no '/', ':' or whitespace.
_IFNAME_RE = re.compile(r"^[^/:\s]{1,15}$")
_RDMA_DEVNAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,63}$")

# Kernel defaults of net.ipv{4,6}.neigh.default.gc_thresh{1,2,3}.
NEIGH_GC_DEFAULTS = (128, 512, 1024)

# The link type (ARPHRD_*) the kernel gives each kind's netdev, and how to fix an entry on the other kind of link.
KIND_LINK_TYPES = {"ipoib": ARPHRD_INFINIBAND, "roce": ARPHRD_ETHER}
_KIND_FIX = {
    "ipoib": "write kind: roce for an Ethernet port, or name the port's IPoIB netdev (ip -br link: link/infiniband)",
    "roce": "write kind: ipoib for an InfiniBand port, or name the RoCE port's netdev (ip -br link: link/ether)",
}


def partition_for_interface(iface, partitions, default_partition=None):
    """The ``opensm_partitions`` entry that serves IPoIB entry ``iface``, or None when the inventory has none.

    An interface on the Default partition (0x7fff) with no ``Default`` entry in ``partitions`` is served by
    ``default_partition`` (``opensm_default_partition``), which role opensm writes as the Default line; a missing
    ``ipoib`` there means off, as role opensm reads it.
    """
    try:
        wanted = interface_partition(iface)
    except ValueError:
        return None
    for partition in partitions or []:
        pkey = partition.get("pkey")
        try:
            number = pkey_base(pkey) if pkey is not None else None
        except ValueError:
            continue
        if number is None and str(partition.get("name", "")).lower() == "default":
            number = DEFAULT_PKEY
        if number == wanted:
            return partition
    if wanted == DEFAULT_PKEY and isinstance(default_partition, dict):
        return {
            "name": "Default",
            "ipoib": default_partition.get("ipoib", False),  # partition_ipoib reads it
            "mtu": default_partition.get("mtu"),
            "var": "opensm_default_partition",
        }
    return None


class _Reporter:
    def __init__(self, host, var, index, name):
        self.prefix = f"{host}: {var}[{index}] ({name if name else 'unnamed'})"
        self.errors = []

    def add(self, field, value, problem, fix):
        self.errors.append(f"{self.prefix}.{field}={_show(value)} {problem}; {fix}")


def _show(value):
    return "(missing)" if value is None else str(value)


def interface_errors(
    iface,
    index=0,
    host="localhost",
    var="fabric_interfaces",
    enhanced_ipoib=False,
    partitions=None,
    roce_min_rdma_mtu=4096,
    default_partition=None,
):
    """Inventory errors of one ``fabric_interfaces`` entry (defaults applied first), each naming host and fix.

    ``enhanced_ipoib``: the device is ConnectX-4 or newer (datagram only). ``partitions``: ``opensm_partitions`` when
    the inventory describes them, to cross-check the IPoIB MTU against the partition's broadcast-group MTU;
    ``default_partition``: ``opensm_default_partition``, for the Default partition when ``partitions`` has no entry.
    ``roce_min_rdma_mtu``: the RoCE RDMA MTU the netdev MTU must allow (None disables the check).
    """
    if not isinstance(iface, dict):
        return [f"{host}: {var}[{index}]={_show(iface)} is not a mapping; write {{name: ib0, kind: ipoib}}"]
    name = iface.get("name")
    report = _Reporter(host, var, index, name)
    for key in sorted(set(iface) - INTERFACE_KEYS):
        report.add(key, iface[key], "is not a known key", "use only {}".format(", ".join(sorted(INTERFACE_KEYS))))
    if not isinstance(name, str) or not _IFNAME_RE.match(name):
        report.add("name", name, "is not a Linux interface name", "use 1-15 characters without '/', ':' or spaces")
    kind = iface.get("kind")
    if kind not in KINDS:
        report.add("kind", kind, "is not a fabric interface kind", "use ipoib or roce")
        return report.errors
    entry = normalise_interface(iface)
    mode = entry["mode"]
    mtu = entry["mtu"]
    if kind == "ipoib":
        if _check_pkey(report, iface):
            _check_ipoib(report, entry, mode, mtu, enhanced_ipoib, partitions, default_partition)
    else:
        _check_roce(report, entry, mtu, roce_min_rdma_mtu)
    _check_address(report, entry.get("address"))
    return report.errors


def _check_pkey(report, iface):
    """Report a ``pkey`` that is not a P_Key or names another partition than the name's suffix; True when usable."""
    raw = iface.get("pkey")
    if raw is None:
        return True
    try:
        pkey = parse_pkey(raw)
    except ValueError as exc:
        report.add("pkey", raw, f"is not a P_Key ({exc})", "write the partition's P_Key as hex, e.g. pkey: '0x8101'")
        return False
    if pkey & DEFAULT_PKEY == 0:
        report.add(
            "pkey", raw, "names partition 0x0000, which is invalid", "use the P_Key of its opensm_partitions entry"
        )
        return False
    suffix = interface_name_pkey(iface.get("name"))
    if suffix is not None and suffix & DEFAULT_PKEY != pkey & DEFAULT_PKEY:
        report.add(
            "pkey",
            raw,
            f"names partition {pkey & DEFAULT_PKEY:#06x} but the interface name {iface.get('name')} carries P_Key"
            f" {suffix:#06x} (partition {suffix & DEFAULT_PKEY:#06x})",
            "make them agree, or drop pkey: the kernel names an IPoIB child after its P_Key",
        )
        return False
    return True


def _check_ipoib(report, entry, mode, mtu, enhanced_ipoib, partitions, default_partition):
    if entry.get("softroce"):
        report.add("softroce", entry["softroce"], "is set on an IPoIB interface", "Soft-RoCE binds to kind roce only")
    if mode not in IPOIB_MODES:
        report.add("mode", mode, "is not an IPoIB mode", "use datagram or connected")
        return
    if mode == "connected" and enhanced_ipoib:
        report.add(
            "mode",
            mode,
            "is refused: the device is enhanced IPoIB (ConnectX-4 or newer), which supports datagram mode only",
            "use mode datagram with mtu 4092",
        )
    if not is_int(mtu):
        report.add("mtu", mtu, "is not a whole number", "use an integer such as 4092")
        return
    top = ipoib_max_mtu(mode)
    if mtu > top:
        fix = "use 4092 (4K fabric) or 2044 (2K fabric)" if mode == "datagram" else "use at most 65520"
        if mode == "datagram" and not enhanced_ipoib:
            fix += ", or mode connected (not on ConnectX-4 or newer)"
        report.add("mtu", mtu, f"is above {top} for {mode} IPoIB", fix)
    elif mtu < MIN_NETDEV_MTU:
        report.add("mtu", mtu, f"is below the IPv4 minimum {MIN_NETDEV_MTU}", "use 4092 for datagram IPoIB")
    partition = partition_for_interface(entry, partitions, default_partition)
    if partition is None:
        return
    pname = partition.get("name", "?")
    pvar = partition.get("var", f"opensm_partitions entry {pname}")
    try:
        ipoib_on = partition_ipoib(partition)
    except ValueError:
        return  # the opensm role reports a malformed ipoib itself
    if not ipoib_on:
        report.add(
            "name",
            entry.get("name"),
            f"is an IPoIB interface on partition {pname}, which has ipoib off (no ipoib: true), so OpenSM creates "
            "no broadcast group",
            f"set ipoib: true on {pvar}",
        )
        return
    try:
        cap = ipoib_partition_limit(mode, partition.get("mtu"))
    except ValueError:
        return  # the opensm role reports a malformed partition mtu itself
    if cap is not None and mtu <= ipoib_max_mtu(mode) and mtu > cap:
        shown = partition.get("mtu") if partition.get("mtu") is not None else "unset (OpenSM default 2048)"
        report.add(
            "mtu",
            mtu,
            f"is above {cap}, what partition {pname} (mtu {shown}) carries in datagram mode",
            f"use mtu {cap}, or set mtu: 4096 on {pvar}",
        )


def _check_roce(report, entry, mtu, roce_min_rdma_mtu):
    if entry.get("pkey") is not None:
        report.add(
            "pkey",
            entry["pkey"],
            "is set on a RoCE interface",
            "remove pkey (P_Keys select InfiniBand partitions; RoCE traffic is separated by VLAN)",
        )
    if entry.get("mode") not in (None, ""):
        report.add("mode", entry["mode"], "is set on a RoCE interface", "remove mode (it applies to ipoib only)")
    softroce = entry.get("softroce")
    if softroce is not None and (not isinstance(softroce, str) or not _RDMA_DEVNAME_RE.match(softroce)):
        report.add("softroce", softroce, "is not an RDMA device name", "use a name such as rxe0")
    if not is_int(mtu):
        report.add("mtu", mtu, "is not a whole number", "use an integer such as 9000")
        return
    if not MIN_NETDEV_MTU <= mtu <= ROCE_MAX_NETDEV_MTU:
        report.add("mtu", mtu, f"is outside {MIN_NETDEV_MTU}-{ROCE_MAX_NETDEV_MTU} for Ethernet", "use 9000 or 4200")
        return
    if roce_min_rdma_mtu:
        rdma_mtu = roce_active_mtu(mtu)
        if rdma_mtu is None or rdma_mtu < roce_min_rdma_mtu:
            report.add(
                "mtu",
                mtu,
                f"gives a RoCE RDMA MTU of {rdma_mtu or 'none'}, below {roce_min_rdma_mtu}"
                " (RDMA MTU = largest IB MTU <= netdev MTU - 96)",
                f"use mtu >= {roce_min_netdev_mtu(roce_min_rdma_mtu)} (4200 or 9000),"
                " or lower fabric_interfaces_roce_min_rdma_mtu",
            )


def _check_address(report, address):
    if address in (None, ""):
        return
    text = str(address)
    if "/" not in text:
        report.add("address", address, "has no prefix length", "write it in CIDR form, e.g. 10.10.0.11/16")
        return
    try:
        iface = ipaddress.ip_interface(text)
    except ValueError as exc:
        report.add("address", address, f"is not a valid address ({exc})", "use CIDR form, e.g. 10.10.0.11/16")
        return
    net = iface.network
    if iface.version == 4 and net.prefixlen < 31 and iface.ip in (net.network_address, net.broadcast_address):
        report.add("address", address, f"is the network or broadcast address of {net}", "use a host address inside it")


def _link_type_error(host, var, index, iface, link):
    """The error of an entry whose kind is not what the kernel reports for its link (ipoib on Ethernet), or None."""
    kind = iface.get("kind")
    actual = link.get("type")
    wanted = KIND_LINK_TYPES.get(kind)
    if wanted is None or actual is None or actual == wanted:
        return None
    name = iface.get("name")
    return (
        f"{host}: {var}[{index}] ({name}).kind={kind} does not match the link: the kernel reports {name} as"
        f" {link_type_name(actual)}, kind {kind} needs an {link_type_name(wanted)} link; {_KIND_FIX[kind]}"
    )


def list_errors(
    interfaces,
    host="localhost",
    var="fabric_interfaces",
    links=None,
    enhanced_ipoib=None,
    check_link_type=True,
    **kwargs,
):
    """All inventory errors of the ``fabric_interfaces`` list: per entry, missing interfaces, then duplicates.

    ``links``: what ``fabric_link_info`` reported, name -> {exists, type, enhanced_ipoib, ...}; an entry whose
    interface does not exist there is an error, so is (with ``check_link_type``) one whose kind does not match the
    link type (ipoib on Ethernet, roce on InfiniBand); its ``enhanced_ipoib`` is used unless ``enhanced_ipoib``
    (name -> bool, the inventory's override) says otherwise.
    """
    if interfaces is None:
        return []
    if not isinstance(interfaces, list):
        return [f"{host}: {var}={_show(interfaces)} is not a list; write a list of {{name, kind, ...}}"]
    errors = []
    links = links or {}
    overrides = enhanced_ipoib or {}
    for index, iface in enumerate(interfaces):
        name = iface.get("name") if isinstance(iface, dict) else None
        link = links.get(name) if isinstance(name, str) else None
        is_enhanced = bool(link and link.get("enhanced_ipoib"))
        if isinstance(name, str) and name in overrides:
            try:
                is_enhanced = parse_bool(overrides[name])
            except ValueError as exc:
                errors.append(f"{host}: fabric_interfaces_enhanced_ipoib.{name}={_show(overrides[name])}: {exc}")
        errors.extend(interface_errors(iface, index, host, var, enhanced_ipoib=is_enhanced, **kwargs))
        if link is not None and not link.get("exists"):
            errors.append(
                f"{host}: {var}[{index}] ({name}) does not exist on this host; check the kernel's name for it"
                " (ip -br link), load its driver first, or remove the entry"
            )
        elif link is not None and check_link_type:
            mismatch = _link_type_error(host, var, index, iface, link)
            if mismatch:
                errors.append(mismatch)
    seen = {}
    for field in ("name", "address", "softroce"):
        seen.clear()
        for index, iface in enumerate(interfaces):
            if not isinstance(iface, dict) or iface.get(field) in (None, ""):
                continue
            value = str(iface[field]).split("/", maxsplit=1)[0] if field == "address" else iface[field]
            if value in seen:
                errors.append(
                    f"{host}: {var}[{index}].{field}={iface[field]} repeats {var}[{seen[value]}];"
                    f" give each interface its own {field}"
                )
            else:
                seen[value] = index
    return errors


def neigh_gc_thresholds(peers, rails, minimum=NEIGH_GC_DEFAULTS):
    """gc_thresh1/2/3 for a host that talks to ``peers`` hosts on each of ``rails`` fabric interfaces.

    Each rail holds one neighbour entry per peer (IPv4 and IPv6 tables alike), so the hard limit gc_thresh3 must sit
    above peers x rails: thresh1 (no garbage collection below it) = entries, thresh2 (soft limit) = 2x, thresh3 (hard
    limit) = 4x, and never below the kernel defaults 128/512/1024.
    """
    peers = parse_int(peers)
    rails = parse_int(rails)
    entries = peers * rails
    return {
        "gc_thresh1": max(minimum[0], entries),
        "gc_thresh2": max(minimum[1], 2 * entries),
        "gc_thresh3": max(minimum[2], 4 * entries),
    }


def host_errors(
    host="localhost",
    os_family=None,
    distribution=None,
    supported_families=("Debian",),
    peer_group=None,
    inventory_groups=None,
    interfaces=None,
    backend=None,
):
    """Role fabric_interfaces' host-level errors: OS family, peer group, no network backend found.

    ``peer_group``: ``fabric_interfaces_peer_group`` when neighbour tuning is on (None: not checked), looked up in
    ``inventory_groups`` (the inventory's group names). ``backend``: the backend in use ('' or None when
    ``fabric_interfaces_backend=auto`` found none), an error only when ``interfaces`` lists something to persist.
    """
    errors = []
    if os_family not in (supported_families or ()):
        errors.append(
            f"{host}: fabric_interfaces supports Debian and Ubuntu hosts; this host is {_show(distribution)}"
            f" ({_show(os_family)}). Leave it out of the play's hosts, or set fabric_interfaces: [] for it."
        )
    if peer_group is not None and peer_group not in (inventory_groups or ()):
        errors.append(
            f"{host}: fabric_interfaces_peer_group={peer_group} is not an inventory group; name the group of hosts"
            " this host exchanges fabric traffic with (default: all)."
        )
    if not backend and isinstance(interfaces, list) and interfaces:
        errors.append(
            f"{host}: fabric_interfaces_backend=auto found no netplan, NetworkManager, systemd-networkd or ifupdown on"
            " this host, so the configuration would not survive a reboot; install one, name it in"
            " fabric_interfaces_backend, or set fabric_interfaces_backend: none to apply at run time only."
        )
    return errors


def role_errors(interfaces, host="localhost", links=None, check_link_type=True, host_checks=None, **kwargs):
    """Every preflight error of role fabric_interfaces, at once: host-level ones (``host_errors`` with
    ``host_checks``), then the ``fabric_interfaces`` list's (``list_errors`` with ``links`` and ``kwargs``)."""
    errors = host_errors(host=host, interfaces=interfaces, **(host_checks or {}))
    return errors + list_errors(interfaces, host=host, links=links, check_link_type=check_link_type, **kwargs)


def fabric_sysctls(interfaces, peers, multirail="auto", multirail_sysctls=None, neigh_tuning=True):
    """The sysctls role fabric_interfaces persists: name -> value, multi-rail ones first, then the neighbour tables.

    ``interfaces``: the ``fabric_interfaces`` list (its length is the rail count; anything but a list counts 0).
    ``multirail``: ``enabled``, ``disabled`` or ``auto`` (two rails or more) applies ``multirail_sysctls``.
    ``neigh_tuning``: net.ipv4/ipv6.neigh.default.gc_thresh1/2/3 from ``peers`` x rails (``neigh_gc_thresholds``),
    for a host with at least one rail (a bool, or the strings -e and AWX surveys pass: "true", "false", ...).
    """
    neigh_tuning = parse_bool(neigh_tuning)
    rails = len(interfaces) if isinstance(interfaces, list) else 0
    result = {}
    if multirail == "enabled" or (multirail == "auto" and rails > 1):
        result.update(multirail_sysctls if isinstance(multirail_sysctls, dict) else {})
    if neigh_tuning and rails > 0:
        thresholds = neigh_gc_thresholds(peers, rails)
        for family in ("ipv4", "ipv6"):
            for key, value in thresholds.items():
                result[f"net.{family}.neigh.default.{key}"] = value
    return result


def preflight_errors(interfaces, checks=None):
    """Every preflight error of role fabric_interfaces; ``checks``: role_errors' keyword arguments as the role's vars
    give them (``__fabric_interfaces_checks``: host, links, enhanced_ipoib, partitions, roce_min_rdma_mtu,
    default_partition, check_link_type, host_checks; a RoCE minimum of 0 checks none)."""
    checks = dict(checks or {})
    checks["roce_min_rdma_mtu"] = int(checks.get("roce_min_rdma_mtu", 4096) or 0) or None
    return role_errors(interfaces, **checks)
