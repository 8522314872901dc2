# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Read RDMA devices and ports from sysfs (/sys/class/infiniband), and parse ``ibv_devinfo -v``.

Pure functions, no Ansible imports. Every path is taken relative to a root directory so tests (and sites that
captured a tree) can point the reader at a copy of sysfs instead of the live one.
"""

import ipaddress
import os
import re

from .fabric_model import roce_active_mtu

_RATE_RE = re.compile(r"^\s*(?P<gbps>[0-9.]+)\s*Gb/sec(?:\s*\((?P<width>\d+)X\s*(?P<speed>\w+)\))?")
_CODE_RE = re.compile(r"^\s*(?P<code>\d+)\s*:\s*(?P<name>.+?)\s*$")
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def read_attribute(path):
    """Content of a sysfs attribute, or None when it is absent or unreadable (sysfs returns EINVAL for the
    type of an unused GID entry)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:  # any byte: never a crash
            return handle.read().strip()
    except OSError:
        return None


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _coded(value):
    """'4: ACTIVE' -> (4, 'ACTIVE')."""
    match = _CODE_RE.match(value or "")
    if not match:
        return None, value
    return int(match.group("code")), match.group("name")


def parse_rate(value):
    """'400 Gb/sec (4X NDR)' -> {'gbps': 400.0, 'width': 4, 'speed': 'NDR'}."""
    match = _RATE_RE.match(value or "")
    if not match:
        return {"gbps": None, "width": None, "speed": None}
    return {
        "gbps": float(match.group("gbps")),
        "width": int(match.group("width")) if match.group("width") else None,
        "speed": match.group("speed"),
    }


def _int(value, base=10):
    try:
        return int(value, base)
    except (TypeError, ValueError):
        return None


def read_port(port_dir, root="/"):
    state_code, state = _coded(read_attribute(os.path.join(port_dir, "state")))
    phys_code, phys_state = _coded(read_attribute(os.path.join(port_dir, "phys_state")))
    rate_text = read_attribute(os.path.join(port_dir, "rate"))
    gids = []
    table = _listdir(os.path.join(port_dir, "gids"))
    for index in sorted(table, key=lambda n: _int(n) or 0):
        gid = read_attribute(os.path.join(port_dir, "gids", index))
        if not gid or gid == ZERO_GID:
            continue
        gids.append(
            {
                "index": _int(index),
                "gid": gid,
                "type": read_attribute(os.path.join(port_dir, "gid_attrs", "types", index)),
                "ndev": read_attribute(os.path.join(port_dir, "gid_attrs", "ndevs", index)),
            }
        )
    netdev = next((g["ndev"] for g in gids if g["ndev"]), None)
    netdev_mtu = _int(read_attribute(os.path.join(root, "sys", "class", "net", netdev, "mtu"))) if netdev else None
    link_layer = read_attribute(os.path.join(port_dir, "link_layer"))
    port = {
        "port": _int(os.path.basename(port_dir)),
        "state": state,
        "state_code": state_code,
        "phys_state": phys_state,
        "phys_state_code": phys_code,
        "rate": rate_text,
        "rate_gbps": parse_rate(rate_text)["gbps"],
        "link_layer": link_layer,
        "lid": _int(read_attribute(os.path.join(port_dir, "lid")), 16),
        "sm_lid": _int(read_attribute(os.path.join(port_dir, "sm_lid")), 16),
        "gids": gids,
        "gid_table_size": len(table),
        "netdev": netdev,
        "netdev_mtu": netdev_mtu,
        "active_mtu": None,
        "active_mtu_source": None,
    }
    # sysfs has no active MTU attribute: for RoCE it follows from the netdev MTU; for InfiniBand only
    # ibv_query_port knows it (merge_ibv_devinfo fills it in).
    if link_layer == "Ethernet" and netdev_mtu:
        port["active_mtu"] = roce_active_mtu(netdev_mtu)
        port["active_mtu_source"] = "netdev_mtu"
    return port


IPV4_MAPPED = "0000:0000:0000:0000:0000:ffff:"


def gid_ipv4(gid):
    """The IPv4 address of an IPv4-mapped GID (``...:ffff:0a14:0001`` is 10.20.0.1), else None."""
    if not gid.startswith(IPV4_MAPPED):
        return None
    digits = gid[len(IPV4_MAPPED) :].replace(":", "")
    return ".".join(str(int(digits[i : i + 2], 16)) for i in range(0, 8, 2))


def gid_family(gid):
    """``ipv4`` (an IPv4-mapped GID), ``link-local`` (fe80::/10) or ``ipv6`` (any other: a routable IPv6 address)."""
    if gid_ipv4(gid):
        return "ipv4"
    return "link-local" if gid.lower().startswith("fe8") else "ipv6"


def nccl_gid(port, family):
    """The GID of ``port`` (read_port's) NCCL uses for RoCE: its first RoCE v2 GID of address ``family`` (ipv4 or
    ipv6: NCCL_IB_ADDR_FAMILY), the one NCCL 2.21 and later select themselves and older NCCL needs as
    NCCL_IB_GID_INDEX; None where the port has none."""
    return next(
        (g for g in port.get("gids") or [] if g.get("type") == "RoCE v2" and gid_family(g.get("gid") or "") == family),
        None,
    )


def read_rdma_devices(root="/"):
    """All RDMA devices under <root>/sys/class/infiniband, each with its ports. An empty list means no RDMA device."""
    base = os.path.join(root, "sys", "class", "infiniband")
    devices = []
    for name in _listdir(base):
        device_dir = os.path.join(base, name)
        node_type_code, node_type = _coded(read_attribute(os.path.join(device_dir, "node_type")))
        ports_dir = os.path.join(device_dir, "ports")
        devices.append(
            {
                "name": name,
                "node_guid": read_attribute(os.path.join(device_dir, "node_guid")),
                "node_type": node_type,
                "fw_ver": read_attribute(os.path.join(device_dir, "fw_ver")),
                "board_id": read_attribute(os.path.join(device_dir, "board_id")),
                "ports": [
                    read_port(os.path.join(ports_dir, p), root)
                    for p in sorted(_listdir(ports_dir), key=lambda n: _int(n) or 0)
                ],
            }
        )
    return devices


def loaded_modules(names, root="/"):
    """{module: bool} from <root>/sys/module/<module> (built-in modules with parameters appear there too)."""
    return {name: os.path.isdir(os.path.join(root, "sys", "module", name)) for name in names}


_DEVINFO_KV_RE = re.compile(r"^\s*(?P<key>[A-Za-z_][A-Za-z0-9_ ]*?|GID\[\s*\d+\])\s*:\s*(?P<value>.*?)\s*$")
_LEADING_NUMBER_RE = re.compile(r"^(\d+)")


def parse_ibv_devinfo(text):
    """Parse ``ibv_devinfo -v``: [{hca_id, node_guid, ..., ports: [{port, state, active_mtu, ..., gids}]}]."""
    devices = []
    device = None
    port = None
    for raw in (text or "").splitlines():
        match = _DEVINFO_KV_RE.match(raw)
        if not match:
            continue
        key, value = match.group("key").strip(), match.group("value")
        if key == "hca_id":
            device = {"hca_id": value, "ports": []}
            devices.append(device)
            port = None
        elif device is None:
            continue
        elif key == "port":
            port = {"port": int(value), "gids": []}
            device["ports"].append(port)
        elif port is not None and key.startswith("GID["):
            gid, _sep, gid_type = value.partition(",")
            port["gids"].append({"index": int(key[4:-1]), "gid": gid.strip(), "type": gid_type.strip() or None})
        elif port is not None:
            if key in ("max_mtu", "active_mtu"):
                number = _LEADING_NUMBER_RE.match(value)
                port[key] = int(number.group(1)) if number else None
            else:
                port[key] = value
        else:
            device[key] = value
    return devices


def expand_gid(gid):
    """GID as printed by ibv_devinfo (IPv6 text, compressed) -> the sysfs form (8 groups of 4 hex digits)."""
    # From the address's bytes: Python 3.13 writes an IPv4-mapped address (a RoCE v2 IPv4 GID) with its last 32 bits
    # dotted ("...:ffff:10.20.0.1") in `exploded`; sysfs always has 8 groups of 4 hex digits.
    packed = ipaddress.IPv6Address(f"{gid}").packed
    return ":".join(packed[i : i + 2].hex() for i in range(0, 16, 2))


def merge_ibv_devinfo(devices, devinfo):
    """Fill active_mtu (and max_mtu) from parsed ``ibv_devinfo -v`` into the sysfs view, marking the source."""
    by_name = {d["hca_id"]: d for d in devinfo}
    for device in devices:
        info = by_name.get(device["name"])
        if not info:
            continue
        for port in device["ports"]:
            match = next((p for p in info["ports"] if p["port"] == port["port"]), None)
            if match and match.get("active_mtu"):
                port["active_mtu"] = match["active_mtu"]
                port["active_mtu_source"] = "ibv_devinfo"
                port["max_mtu"] = match.get("max_mtu")
    return devices


def read_interface_mtus(interfaces, root="/"):
    """[{name, expected_mtu, mtu}] for ``[{name, expected_mtu}]``: the MTU from <root>/sys/class/net/<name>/mtu, or
    None when the interface does not exist (or its MTU cannot be read)."""
    return [
        {
            "name": iface["name"],
            "expected_mtu": iface.get("expected_mtu"),
            "mtu": _int(read_attribute(os.path.join(root, "sys", "class", "net", iface["name"], "mtu"))),
        }
        for iface in interfaces or []
    ]
