# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Read what the kernel says about a network interface, from sysfs, for the fabric_link modules; and which network
backend persists the host's interfaces.

Pure functions over a sysfs root (``/sys`` on a host, a directory tree in unit tests) and a file-system root.
"""

import fnmatch
import ipaddress
import os

from .rdma_sysfs import read_attribute

ARPHRD_ETHER = 1
ARPHRD_INFINIBAND = 32
# include/uapi/linux/if_arp.h: what /sys/class/net/<if>/type holds, named as `ip link` shows it (link/ether ...).
LINK_TYPE_NAMES = {ARPHRD_ETHER: "Ethernet", ARPHRD_INFINIBAND: "InfiniBand"}
IFF_UP = 0x1
# Drivers whose IPoIB netdevs are "enhanced IPoIB" (ConnectX-4 and newer): datagram mode only.
ENHANCED_IPOIB_DRIVERS = ("mlx5_core",)
# MLNX_OFED and some kernels let the administrator turn enhanced IPoIB off with this module parameter.
ENHANCED_IPOIB_PARAMS = ("module/ib_ipoib/parameters/ipoib_enhanced", "module/mlx5_ib/parameters/ipoib_enhanced")


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
    flags = _int(read_attribute(os.path.join(base, "flags")))
    link_type = _int(read_attribute(os.path.join(base, "type")))
    mode = read_attribute(os.path.join(base, "mode"))
    info = {
        "name": name,
        "exists": True,
        "mtu": _int(read_attribute(os.path.join(base, "mtu"))),
        "operstate": read_attribute(os.path.join(base, "operstate")),
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
        value = read_attribute(os.path.join(sysfs_root, param))
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


def link_type_name(link_type):
    """'Ethernet' (1), 'InfiniBand' (32), else 'type N' for the ARPHRD_* number ``link_type``."""
    return LINK_TYPE_NAMES.get(link_type, f"type {link_type}")


# --- sysctls ----------------------------------------------------------------------------------------------------------


def present_sysctls(keys, root="/"):
    """The sysctl ``keys`` (dotted, ``net.ipv4.conf.all.rp_filter``) this kernel exposes under ``root``/proc/sys.

    A container's network namespace lacks some (net.*.neigh.default.gc_thresh* belong to the initial namespace).
    """
    base = os.path.join(root, "proc", "sys")
    return [key for key in keys if os.path.isfile(os.path.join(base, *key.split(".")))]


# --- network backend --------------------------------------------------------------------------------------------------

# netplan reads YAML files from /etc/netplan (netplan(5)); the role counts *.yml too, as it always has.
NETPLAN_BINARY = "usr/sbin/netplan"
NETPLAN_DIR = "etc/netplan"
NETPLAN_PATTERNS = ("*.yaml", "*.yml")
IFUPDOWN_FILES = ("sbin/ifup", "etc/network/interfaces")
# The daemons whose running state decides the backend, in order of precedence, and the backend each stands for.
BACKEND_UNITS = (("NetworkManager.service", "NetworkManager"), ("systemd-networkd.service", "systemd-networkd"))
# `systemctl is-active` states of a unit that is up (reloading: up, re-reading its configuration).
ACTIVE_STATES = ("active", "reloading")


def netplan_configured(root="/"):
    """Whether netplan is installed and /etc/netplan holds a configuration file (hidden files aside)."""
    if not os.path.exists(os.path.join(root, NETPLAN_BINARY)):
        return False
    try:
        names = os.listdir(os.path.join(root, NETPLAN_DIR))
    except OSError:
        return False
    return any(
        not name.startswith(".")
        and any(fnmatch.fnmatch(name, pattern) for pattern in NETPLAN_PATTERNS)
        and os.path.isfile(os.path.join(root, NETPLAN_DIR, name))
        for name in names
    )


def ifupdown_installed(root="/"):
    return all(os.path.exists(os.path.join(root, path)) for path in IFUPDOWN_FILES)


def parse_is_active(units, output):
    """Unit -> True/False from ``systemctl is-active <units...>`` output (one state a line, in order).

    Output that does not have one line per unit (systemctl refused: "System has not been booted with systemd")
    means none is known to run.
    """
    states = [line.strip() for line in (output or "").splitlines() if line.strip()]
    if len(states) != len(units):
        return dict.fromkeys(units, False)
    return {unit: state in ACTIVE_STATES for unit, state in zip(units, states)}


def detect_backend(root="/", unit_active=None):
    """The backend that persists this host's interfaces, or None when there is none.

    netplan when it has a configuration, else a running NetworkManager, else a running systemd-networkd, else
    ifupdown when installed. ``unit_active``: a callable taking the unit names and returning unit -> bool (systemd's
    view); it is called only when netplan does not decide.
    """
    if netplan_configured(root):
        return "netplan"
    active = unit_active([unit for unit, _backend in BACKEND_UNITS]) if unit_active else {}
    for unit, backend in BACKEND_UNITS:
        if active.get(unit):
            return backend
    if ifupdown_installed(root):
        return "ifupdown"
    return None


# --- applying mode, MTU and address at run time -----------------------------------------------------------------------


def same_address(wanted, present):
    """Whether the CIDR ``wanted`` is among ``present`` (the same address and prefix, however written)."""
    try:
        wanted_if = ipaddress.ip_interface(wanted)
    except ValueError:
        return False
    for item in present:
        try:
            if ipaddress.ip_interface(item) == wanted_if:
                return True
        except ValueError:
            continue
    return False


class LinkApplier:
    """Makes one running interface match ``{name, mode, mtu, address, link_down_ok}``, changing only what differs.

    The IPoIB mode first (a mode change resets the MTU), then the MTU while the link stays up (down/up only when the
    kernel refuses and ``link_down_ok``), then admin up, then the address when missing. ``actions`` lists what was
    done, or would be in check mode. ``module`` is the AnsibleModule (run_command, fail_json, warn, check_mode).
    """

    def __init__(self, module, sysfs_root="/sys"):
        self.module = module
        self.sysfs_root = sysfs_root
        self.ip = module.get_bin_path("ip", required=True)
        self.actions = []

    @staticmethod
    def valid_name(name):
        return bool(name) and "/" not in name and name not in (".", "..")

    def run_ip(self, *args):
        return self.module.run_command([self.ip] + list(args), environ_update={"LC_ALL": "C"})

    def addresses(self, name):
        rc, out, err = self.run_ip("-o", "addr", "show", "dev", name)
        if rc != 0:
            self.module.fail_json(msg=f"ip addr show dev {name} failed: {err.strip()}", actions=self.actions)
        return parse_ip_addr(out)

    def state(self, name):
        link = read_link(name, self.sysfs_root)
        if not link["exists"]:
            self.module.fail_json(msg=f"interface {name} does not exist (see ip -br link)", actions=self.actions)
        link["addresses"] = self.addresses(name)
        return {key: link[key] for key in ("mode", "mtu", "admin_up", "addresses")}

    def set_mode(self, name, wanted, before):
        if wanted is None:
            return before["mtu"]
        if before["mode"] is None:
            self.module.warn(f"{name} has no mode: it is not an IPoIB netdev, mode {wanted} not applied")
            return before["mtu"]
        if before["mode"] == wanted:
            return before["mtu"]
        self.actions.append("{}: mode {} -> {}".format(name, before["mode"], wanted))
        if self.module.check_mode:
            return None
        path = mode_path(name, self.sysfs_root)
        try:
            with open(path, "w") as handle:
                handle.write(wanted + "\n")
        except OSError as exc:
            self.module.fail_json(msg=f"writing {wanted} to {path} failed: {exc}", actions=self.actions)
        return read_link(name, self.sysfs_root)["mtu"]

    def set_mtu(self, name, wanted, current_mtu, admin_up, link_down_ok):
        if wanted is None or current_mtu == wanted:
            return
        self.actions.append(f"{name}: mtu {current_mtu} -> {wanted}")
        if self.module.check_mode:
            return
        rc, _out, err = self.run_ip("link", "set", "dev", name, "mtu", str(wanted))
        if rc == 0:
            return
        if not (link_down_ok and admin_up):
            self.module.fail_json(
                msg=f"{name}: the kernel refused mtu {wanted} on the running link ({err.strip()}); set "
                "fabric_interfaces_link_down_ok: true to allow taking the link down for the change",
                actions=self.actions,
            )
        self.actions.append(f"{name}: link down/up for the mtu change")
        for args in (("down",), ("mtu", str(wanted)), ("up",)):
            rc, _out, err = self.run_ip("link", "set", "dev", name, *args)
            if rc != 0:
                self.module.fail_json(
                    msg="ip link set dev {} {} failed: {}".format(name, " ".join(args), err.strip()),
                    actions=self.actions,
                )

    def set_up(self, name, admin_up):
        if admin_up:
            return
        self.actions.append(f"{name}: link up")
        if not self.module.check_mode:
            rc, _out, err = self.run_ip("link", "set", "dev", name, "up")
            if rc != 0:
                self.module.fail_json(msg=f"ip link set dev {name} up failed: {err.strip()}", actions=self.actions)

    def add_address(self, name, wanted, addresses):
        if not wanted or same_address(wanted, addresses):
            return
        self.actions.append(f"{name}: address {wanted} added")
        if not self.module.check_mode:
            rc, _out, err = self.run_ip("addr", "add", wanted, "dev", name)
            if rc != 0:
                self.module.fail_json(
                    msg=f"ip addr add {wanted} dev {name} failed: {err.strip()}", actions=self.actions
                )

    def apply(self, spec):
        """Make the interface match ``spec``; its state before and after (predicted in check mode)."""
        name, mode, mtu, address = spec["name"], spec.get("mode"), spec.get("mtu"), spec.get("address")
        before = self.state(name)
        mtu_after_mode = self.set_mode(name, mode, before)
        self.set_mtu(name, mtu, mtu_after_mode, before["admin_up"], spec.get("link_down_ok", False))
        self.set_up(name, before["admin_up"])
        self.add_address(name, address, before["addresses"])
        if not self.module.check_mode:
            return before, self.state(name)
        after = dict(before, admin_up=True)
        if mode and before["mode"] is not None:
            after["mode"] = mode
        if mtu is not None:
            after["mtu"] = mtu
        if address and not same_address(address, before["addresses"]):
            after["addresses"] = before["addresses"] + [address]
        return before, after


# --- module fabric_link_info (plugins/modules/fabric_link_info.py runs it, and module host_checks) -----------------

INFO_ARGUMENT_SPEC = {
    "names": {"type": "list", "elements": "str", "required": True},
    "sysfs_root": {"type": "path", "default": "/sys"},
    "detect_backend": {"type": "bool", "default": False},
    "sysctls": {"type": "list", "elements": "str", "default": []},
    "root": {"type": "path", "default": "/"},
}


def _systemd_active(module):
    """A callable giving unit -> running, from one `systemctl is-active` call (no systemd: nothing runs)."""

    def unit_active(units):
        systemctl = module.get_bin_path("systemctl")
        if not systemctl:
            return dict.fromkeys(units, False)
        # is-active exits non-zero when any unit is not active; its output is the answer either way.
        _rc, out, _err = module.run_command(
            [systemctl, "is-active", *units], environ_update={"LC_ALL": "C", "LANG": "C"}
        )
        return parse_is_active(units, out)

    return unit_active


def info(module):
    """Module fabric_link_info on ``module`` (an AnsibleModule, or host_checks' stand-in): exits through it."""
    params = module.params
    result = {
        "changed": False,
        "links": {name: read_link(name, params["sysfs_root"]) for name in params["names"]},
        "sysctls_present": present_sysctls(params["sysctls"], params["root"]),
    }
    if params["detect_backend"]:
        result["backend"] = detect_backend(params["root"], _systemd_active(module))
    module.exit_json(**result)
