# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""MTU arithmetic and inventory validation for IPoIB and RoCE interfaces.

Pure functions only (no Ansible imports), importable on Python 3.8 targets and unit-tested with pytest.

The numbers come from the kernel and rdma-core (see shared FACTS):
  * IPoIB datagram mode (IB UD) carries the IB link MTU minus the 4-byte IPoIB header: 4092 on a 4K fabric,
    2044 on 2K, and never more than the partition's broadcast-group MTU (OpenSM's partition ``mtu=``, default 2048).
  * IPoIB connected mode (IB RC) goes up to 65520, but ConnectX-4 and newer (enhanced IPoIB) are datagram only.
  * RoCE: the RDMA active MTU is the largest IB MTU that fits in the netdev MTU minus 96 bytes of headers, so a
    4096 RDMA MTU needs a netdev MTU of at least 4192.
"""

import contextlib
import ipaddress
import re

IB_MTUS = (256, 512, 1024, 2048, 4096)
# IBTA MTU codes as OpenSM's partitions.conf writes them (mtu=5 is 4096).
IB_MTU_CODES = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}
OPENSM_DEFAULT_PARTITION_MTU = 2048
IPOIB_HEADER_BYTES = 4
IPOIB_CONNECTED_MAX_MTU = 65520
ROCE_HEADER_BYTES = 96
# IPv4's minimum; below it the kernel refuses an address anyway.
MIN_NETDEV_MTU = 68
# The largest Ethernet MTU a ConnectX NIC accepts (mlx5 max_mtu); switches usually stop at 9216.
ROCE_MAX_NETDEV_MTU = 9978
DEFAULT_PKEY = 0x7FFF

KINDS = ("ipoib", "roce")
IPOIB_MODES = ("datagram", "connected")
DEFAULT_MTU = {("ipoib", "datagram"): 4092, ("ipoib", "connected"): IPOIB_CONNECTED_MAX_MTU, ("roce", None): 9000}

# Linux: IFNAMSIZ - 1 characters, no '/', ':' or whitespace.
_IFNAME_RE = re.compile(r"^[^/:\s]{1,15}$")
_RDMA_DEVNAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,63}$")
_IPOIB_CHILD_RE = re.compile(r"^.+\.([0-9a-fA-F]{4})$")

# Kernel defaults of net.ipv{4,6}.neigh.default.gc_thresh{1,2,3}.
NEIGH_GC_DEFAULTS = (128, 512, 1024)


def ipoib_max_mtu(mode, ib_mtu=4096):
    """Largest IPoIB netdev MTU for ``mode`` on a fabric whose IB MTU is ``ib_mtu`` bytes."""
    if mode == "connected":
        return IPOIB_CONNECTED_MAX_MTU
    if mode == "datagram":
        if ib_mtu not in IB_MTUS:
            raise ValueError("IB MTU must be one of {}, got {!r}".format(", ".join(map(str, IB_MTUS)), ib_mtu))
        return ib_mtu - IPOIB_HEADER_BYTES
    raise ValueError(f"IPoIB mode must be datagram or connected, got {mode!r}")


def roce_active_mtu(netdev_mtu):
    """RDMA active MTU the kernel derives for a RoCE port whose netdev has ``netdev_mtu``; None when none fits."""
    fitting = [m for m in IB_MTUS if m <= int(netdev_mtu) - ROCE_HEADER_BYTES]
    return fitting[-1] if fitting else None


def roce_min_netdev_mtu(rdma_mtu):
    """Smallest netdev MTU that gives a RoCE RDMA MTU of ``rdma_mtu`` (4096 -> 4192)."""
    if rdma_mtu not in IB_MTUS:
        raise ValueError("RDMA MTU must be one of {}, got {!r}".format(", ".join(map(str, IB_MTUS)), rdma_mtu))
    return rdma_mtu + ROCE_HEADER_BYTES


def partition_mtu_bytes(value):
    """IB MTU in bytes of an ``opensm_partitions[].mtu``: bytes (4096) or an IBTA code (5); None -> OpenSM default."""
    if value is None or value == "":
        return OPENSM_DEFAULT_PARTITION_MTU
    number = _as_int(value)
    if number in IB_MTUS:
        return number
    if number in IB_MTU_CODES:
        return IB_MTU_CODES[number]
    raise ValueError(f"partition mtu must be one of {IB_MTUS} bytes (or IBTA code 1-5), got {value!r}")


def parse_pkey(value):
    """P_Key as an int with the membership bit cleared (0x8001 and 0x0001 are the same partition)."""
    number = value if isinstance(value, int) and not isinstance(value, bool) else int(str(value).strip(), 0)
    if not 0 < number <= 0xFFFF:
        raise ValueError(f"P_Key must be 0x0001-0xffff, got {value!r}")
    return number & 0x7FFF


def interface_pkey(name):
    """P_Key an IPoIB interface name implies: ``ib0.8001`` -> 0x0001, ``ib0`` -> the default partition 0x7fff."""
    match = _IPOIB_CHILD_RE.match(name)
    return int(match.group(1), 16) & 0x7FFF if match else DEFAULT_PKEY


def partition_for_interface(name, partitions):
    """The ``opensm_partitions`` entry that serves IPoIB interface ``name``, or None when the inventory has none."""
    wanted = interface_pkey(name)
    for partition in partitions or []:
        pkey = partition.get("pkey")
        try:
            number = parse_pkey(pkey) if pkey is not None else None
        except (TypeError, ValueError):
            continue
        if number is None and str(partition.get("name", "")).lower() == "default":
            number = DEFAULT_PKEY
        if number == wanted:
            return partition
    return None


def normalise_interface(iface):
    """A copy of one ``fabric_interfaces`` entry with the defaults filled in (mode, mtu, address, softroce)."""
    result = dict(iface)
    kind = result.get("kind")
    if kind == "ipoib":
        result["mode"] = result.get("mode") or "datagram"
    else:
        result.setdefault("mode", None)
    if result.get("mtu") in (None, ""):
        result["mtu"] = DEFAULT_MTU.get((kind, result["mode"]))
    else:
        with contextlib.suppress(ValueError):
            result["mtu"] = _as_int(result["mtu"])
    result.setdefault("address", None)
    result.setdefault("softroce", None)
    if kind == "roce" and isinstance(result["mtu"], int):
        result["rdma_mtu"] = roce_active_mtu(result["mtu"])
    return result


def _as_int(value):
    if isinstance(value, bool):
        raise ValueError(f"not a number: {value!r}")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if not re.match(r"^[0-9]+$", text):
        raise ValueError(f"not a number: {value!r}")
    return int(text)


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
):
    """Inventory errors of one ``fabric_interfaces`` entry (defaults applied first), each naming host and fix.

    ``enhanced_ipoib``: the device is ConnectX-4 or newer (datagram only). ``partitions``: ``opensm_partitions`` when
    the inventory describes them, to cross-check the IPoIB MTU against the partition's broadcast-group MTU.
    ``roce_min_rdma_mtu``: the RoCE RDMA MTU the netdev MTU must allow (None disables the check).
    """
    if not isinstance(iface, dict):
        return [f"{host}: {var}[{index}]={_show(iface)} is not a mapping; write {{name: ib0, kind: ipoib}}"]
    name = iface.get("name")
    report = _Reporter(host, var, index, name)
    known = {"name", "kind", "mode", "mtu", "address", "softroce"}
    for key in sorted(set(iface) - known):
        report.add(key, iface[key], "is not a known key", "use only {}".format(", ".join(sorted(known))))
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
        _check_ipoib(report, entry, mode, mtu, enhanced_ipoib, partitions)
    else:
        _check_roce(report, entry, mtu, roce_min_rdma_mtu)
    _check_address(report, entry.get("address"))
    return report.errors


def _check_ipoib(report, entry, mode, mtu, enhanced_ipoib, partitions):
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
    if not isinstance(mtu, int):
        report.add("mtu", mtu, "is not a number", "use an integer such as 4092")
        return
    top = ipoib_max_mtu(mode)
    if mtu > top:
        fix = "use 4092 (4K fabric) or 2044 (2K fabric)" if mode == "datagram" else "use at most 65520"
        if mode == "datagram" and not enhanced_ipoib:
            fix += ", or mode connected (not on ConnectX-4 or newer)"
        report.add("mtu", mtu, f"is above {top} for {mode} IPoIB", fix)
    elif mtu < MIN_NETDEV_MTU:
        report.add("mtu", mtu, f"is below the IPv4 minimum {MIN_NETDEV_MTU}", "use 4092 for datagram IPoIB")
    partition = partition_for_interface(entry.get("name") or "", partitions)
    if partition is None:
        return
    pname = partition.get("name", "?")
    if partition.get("ipoib") is False:
        report.add(
            "name",
            entry.get("name"),
            f"is an IPoIB interface on partition {pname}, which has ipoib: false (no broadcast group)",
            "set ipoib: true on that opensm_partitions entry",
        )
        return
    try:
        ib_mtu = partition_mtu_bytes(partition.get("mtu"))
    except ValueError:
        return  # the opensm role reports a malformed partition mtu itself
    cap = ib_mtu - IPOIB_HEADER_BYTES
    if mode == "datagram" and mtu <= ipoib_max_mtu(mode) and mtu > cap:
        shown = partition.get("mtu") if partition.get("mtu") is not None else "unset (OpenSM default 2048)"
        report.add(
            "mtu",
            mtu,
            f"is above {cap}, what partition {pname} (mtu {shown}) carries in datagram mode",
            f"use mtu {cap}, or set mtu: 4096 on opensm_partitions entry {pname}",
        )


def _check_roce(report, entry, mtu, roce_min_rdma_mtu):
    if entry.get("mode") not in (None, ""):
        report.add("mode", entry["mode"], "is set on a RoCE interface", "remove mode (it applies to ipoib only)")
    softroce = entry.get("softroce")
    if softroce is not None and (not isinstance(softroce, str) or not _RDMA_DEVNAME_RE.match(softroce)):
        report.add("softroce", softroce, "is not an RDMA device name", "use a name such as rxe0")
    if not isinstance(mtu, int):
        report.add("mtu", mtu, "is not a number", "use an integer such as 9000")
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


def list_errors(interfaces, host="localhost", var="fabric_interfaces", links=None, enhanced_ipoib=None, **kwargs):
    """All inventory errors of the ``fabric_interfaces`` list: per entry, missing interfaces, then duplicates.

    ``links``: what ``fabric_link_info`` reported, name -> {exists, enhanced_ipoib, ...}; an entry whose interface
    does not exist there is an error, and its ``enhanced_ipoib`` is used unless ``enhanced_ipoib`` (name -> bool,
    the inventory's override) says otherwise.
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
        is_enhanced = overrides.get(name, bool(link and link.get("enhanced_ipoib")))
        errors.extend(interface_errors(iface, index, host, var, enhanced_ipoib=bool(is_enhanced), **kwargs))
        if link is not None and not link.get("exists"):
            errors.append(
                f"{host}: {var}[{index}] ({name}) does not exist on this host; check the kernel's name for it"
                " (ip -br link), load its driver first, or remove the entry"
            )
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
    peers = _as_int(peers)
    rails = _as_int(rails)
    entries = peers * rails
    return {
        "gc_thresh1": max(minimum[0], entries),
        "gc_thresh2": max(minimum[1], 2 * entries),
        "gc_thresh3": max(minimum[2], 4 * entries),
    }
