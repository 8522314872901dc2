# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Read what the kernel says about a network interface, from sysfs, for the fabric_link modules.

Pure functions over a sysfs root (``/sys`` on a host, a directory tree in unit tests).
"""

import os

ARPHRD_ETHER = 1
ARPHRD_INFINIBAND = 32
IFF_UP = 0x1
# Drivers whose IPoIB netdevs are "enhanced IPoIB" (ConnectX-4 and newer): datagram mode only.
ENHANCED_IPOIB_DRIVERS = ("mlx5_core",)
# MLNX_OFED and some kernels let the administrator turn enhanced IPoIB off with this module parameter.
ENHANCED_IPOIB_PARAMS = ("module/ib_ipoib/parameters/ipoib_enhanced", "module/mlx5_ib/parameters/ipoib_enhanced")


def _read(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def _int(text):
    try:
        return int(text, 0)
    except (TypeError, ValueError):
        return None


def read_link(name, sysfs_root="/sys"):
    """State of interface ``name``: exists, mtu, mode (None when the device has no IPoIB mode), driver, flags."""
    base = os.path.join(sysfs_root, "class", "net", name)
    if not name or "/" in name or not os.path.isdir(base):
        return {"name": name, "exists": False}
    driver_link = os.path.join(base, "device", "driver")
    driver = os.path.basename(os.path.realpath(driver_link)) if os.path.lexists(driver_link) else None
    flags = _int(_read(os.path.join(base, "flags")))
    link_type = _int(_read(os.path.join(base, "type")))
    mode = _read(os.path.join(base, "mode"))
    info = {
        "name": name,
        "exists": True,
        "mtu": _int(_read(os.path.join(base, "mtu"))),
        "operstate": _read(os.path.join(base, "operstate")),
        "admin_up": bool(flags & IFF_UP) if flags is not None else None,
        "type": link_type,
        "infiniband": link_type == ARPHRD_INFINIBAND,
        "mode": mode or None,
        "driver": driver,
    }
    info["enhanced_ipoib"] = is_enhanced_ipoib(info, sysfs_root)
    return info


def is_enhanced_ipoib(info, sysfs_root="/sys"):
    """True when ``info`` describes an IPoIB netdev of a ConnectX-4 or newer HCA with enhanced IPoIB left on."""
    if not info.get("exists") or not info.get("infiniband") or info.get("driver") not in ENHANCED_IPOIB_DRIVERS:
        return False
    for param in ENHANCED_IPOIB_PARAMS:
        value = _read(os.path.join(sysfs_root, param))
        if value is not None and value.upper() in ("0", "N"):
            return False
    return True


def mode_path(name, sysfs_root="/sys"):
    return os.path.join(sysfs_root, "class", "net", name, "mode")


def parse_ip_addr(output):
    """Addresses (CIDR) from ``ip -o addr show dev X`` output."""
    addresses = []
    for line in output.splitlines():
        fields = line.split()
        for family in ("inet", "inet6"):
            if family in fields:
                position = fields.index(family)
                if position + 1 < len(fields):
                    addresses.append(fields[position + 1])
    return addresses
