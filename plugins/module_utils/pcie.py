# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""PCIe links of the GPUs and RDMA NICs, read from sysfs (fabric_checks.health.pcie_checks judges them: each at the
speed and width it and the port above it can both run; a link that trained down reads "up" to every port check).

The files are the kernel's (drivers/pci/pci-sysfs.c): ``current_link_speed`` and ``max_link_speed`` as
``32.0 GT/s PCIe`` (``8 GT/s`` before Linux 5.3, ``Unknown`` where the link is down), ``current_link_width`` and
``max_link_width`` as a number of lanes. ``/sys/bus/pci/devices/<address>`` links to the device's place in the
topology, whose parent directory is the port above it (a root or switch downstream port) unless it is the host
bridge. Standard library only (Python 3.8 targets): the node check runs it on the node.
"""

import os
import re
import sys

PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
NVIDIA = "0x10de"
_SPEED = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*GT/s")


def parse_speed(text):
    """GT/s of a ``*_link_speed`` file (``32.0 GT/s PCIe``, ``8 GT/s``), or None (``Unknown``, unreadable)."""
    match = _SPEED.match(text or "")
    return float(match.group(1)) if match else None


def _read(directory, name):
    try:
        with open(os.path.join(directory, name), encoding="ascii", errors="replace") as handle:
            return handle.read().strip()
    except OSError:  # absent, or not a PCIe function (the kernel refuses the read)
        return None


def _width(text):
    return int(text) if text and text.isdigit() else None


def _link(directory):
    return {
        "current_speed": parse_speed(_read(directory, "current_link_speed")),
        "current_width": _width(_read(directory, "current_link_width")),
        "max_speed": parse_speed(_read(directory, "max_link_speed")),
        "max_width": _width(_read(directory, "max_link_width")),
    }


# The kernel's IOMMU domain types (/sys/kernel/iommu_groups/<n>/type, Linux 5.11 and later) and what they mean here.
IOMMU_TYPES = {"identity": "passthrough", "DMA": "translated", "DMA-FQ": "translated", "blocked": "blocked"}


def iommu_mode(device_dir):
    """How the IOMMU treats a device: ``off`` (the device has no IOMMU group: no IOMMU, or it is disabled),
    ``passthrough`` (an identity domain: iommu=pt), ``translated`` (a DMA domain), ``blocked``, or the group's type
    itself when the kernel names another; ``unknown`` where the group has no type file (Linux before 5.11)."""
    group = os.path.join(device_dir, "iommu_group")
    if not os.path.exists(group):
        return "off"
    kind = _read(os.path.realpath(group), "type")
    return "unknown" if kind is None else IOMMU_TYPES.get(kind, kind)


def read_device(root, address, role):
    """One PCI function's link and the port above it: {address, role, vendor, device, class, link, port}; ``port``
    is None below a host bridge (a device on the root bus, as in a VM) or where the parent has no PCIe link."""
    link = os.path.join(root, "sys/bus/pci/devices", address)
    real = os.path.realpath(link)
    found = {
        "address": address,
        "role": role,
        "vendor": _read(real, "vendor"),
        "device": _read(real, "device"),
        "class": _read(real, "class"),
        "link": _link(real),
        "port": None,
        "iommu": iommu_mode(real),
    }
    parent = os.path.dirname(real)
    if PCI_ADDRESS.match(os.path.basename(parent)):
        port = _link(parent)
        if port["max_speed"] or port["max_width"]:
            found["port"] = dict(port, address=os.path.basename(parent))
    return found


def _pci_address_of(path):
    """The PCI address a sysfs ``device`` link leads to, or None (a virtual device: Soft-RoCE, ibsim)."""
    real = os.path.realpath(path)
    name = os.path.basename(real)
    return name if PCI_ADDRESS.match(name) and "/devices/" in real else None


def read_links(root="/"):
    """The links to judge: every NVIDIA GPU (vendor 0x10de, display class) and every RDMA device's PCI function
    (``/sys/class/infiniband/<device>/device``), each once, in address order."""
    roles = {}
    devices_dir = os.path.join(root, "sys/bus/pci/devices")
    for address in sorted(os.listdir(devices_dir)) if os.path.isdir(devices_dir) else []:
        base = os.path.join(devices_dir, address)
        if _read(base, "vendor") == NVIDIA and (_read(base, "class") or "").startswith("0x03"):
            roles[address] = "GPU"
    rdma_dir = os.path.join(root, "sys/class/infiniband")
    for name in sorted(os.listdir(rdma_dir)) if os.path.isdir(rdma_dir) else []:
        address = _pci_address_of(os.path.join(rdma_dir, name, "device"))
        if address:
            roles.setdefault(address, f"RDMA NIC {name}")
    return [read_device(root, address, role) for address, role in sorted(roles.items())]


# PCIe Access Control Services (PCIe Base Specification, ACS Extended Capability, ID 0x000D): the ACS Control
# register at offset 6 of the capability. Request Redirect and Completion Redirect send peer-to-peer traffic up to
# the root complex, where it is slower or blocked (NCCL's troubleshooting, "PCI Access Control Services (ACS)").
ACS_CAPABILITY = 0x000D
ACS_BITS = {
    0x01: "SrcValid",
    0x02: "TransBlk",
    0x04: "ReqRedir",
    0x08: "CmpltRedir",
    0x10: "UpstreamFwd",
    0x20: "EgressCtrl",
    0x40: "DirectTrans",
}
ACS_REDIRECT = 0x04 | 0x08


def acs_offset(config):
    """Where the ACS extended capability starts in a function's configuration space (``config``: its bytes, as sysfs
    ``config`` gives them to root), or None when it has none or the extended space was not readable (only the first
    64 bytes are readable without root). The extended capabilities are a list from 0x100, each header giving the
    next one's offset in its top 12 bits."""
    offset, seen = 0x100, set()
    while 0x100 <= offset <= len(config) - 8 and offset not in seen:
        seen.add(offset)
        header = int.from_bytes(config[offset : offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == ACS_CAPABILITY:
            return offset
        offset = (header >> 20) & 0xFFC
    return None


def acs_control(config):
    """The ACS Control register (offset 6 of the ACS capability) of ``config``, or None (acs_offset)."""
    offset = acs_offset(config)
    return None if offset is None else int.from_bytes(config[offset + 6 : offset + 8], "little")


def acs_names(control):
    return [name for bit, name in ACS_BITS.items() if control & bit]


def _ancestors(root, address):
    """The PCI functions above ``address``, nearest first (its ports, switches, up to the root bus)."""
    path = os.path.realpath(os.path.join(root, "sys/bus/pci/devices", address))
    found = []
    parent = os.path.dirname(path)
    while PCI_ADDRESS.match(os.path.basename(parent)):
        found.append(os.path.basename(parent))
        parent = os.path.dirname(parent)
    return found


# The PCI Express capability (ID 0x10) in the standard capability list: its Device/Port Type (bits 7:4 of the
# capabilities register at offset 2; PCIe Base Specification, "PCI Express Capabilities Register").
PCIE_CAPABILITY = 0x10
ROOT_PORT, UPSTREAM_PORT, DOWNSTREAM_PORT = 0x4, 0x5, 0x6


def port_type(config):
    """The Device/Port Type of a function's configuration space (``config``: its bytes), or None when it has no PCI
    Express capability or the capability list was not readable (past the first 64 bytes, root only)."""
    if len(config) < 0x40:
        return None
    offset, seen = config[0x34] & 0xFC, set()
    while 0x40 <= offset <= len(config) - 4 and offset not in seen:
        seen.add(offset)
        if config[offset] == PCIE_CAPABILITY:
            return (int.from_bytes(config[offset + 2 : offset + 4], "little") >> 4) & 0xF
        offset = config[offset + 1] & 0xFC
    return None


def _port_type_of(root, address):
    try:
        with open(os.path.join(root, "sys/bus/pci/devices", address, "config"), "rb") as handle:
            return port_type(handle.read(256))
    except OSError:
        return None


# NCCL's distances between a GPU and a NIC (NCCL_NET_GDR_LEVEL, nvidia-smi topo -m), nearest first: those that meet
# in a PCIe switch are PIX (one switch) and PXB (several); the others meet at the root complex or across sockets.
DISTANCES = ("PIX", "PXB", "PHB", "NODE", "SYS")


def path_bridges(root, first, second, max_distance="PXB"):
    """The switch downstream ports between two functions that meet in a PCIe switch (their nearest common ancestor is
    a PCI function, within ``max_distance``: PIX one switch, PXB several): the ports peer-to-peer traffic between them
    crosses, where ACS redirect sends it up to the root complex. Functions that meet only at the root complex or
    across sockets share no switch: [] (their traffic goes through the root complex whatever ACS says; clearing a root
    port would take the isolation from everything below it). A function known to be a root or upstream port is
    never one of them; one whose type cannot be read (not root) is kept, for the reader to say it cannot judge it."""
    above_first, above_second = _ancestors(root, first), _ancestors(root, second)
    common = [a for a in above_first if a in above_second]
    if not common:
        return []
    meet = common[0]
    below = above_first[: above_first.index(meet)] + above_second[: above_second.index(meet)]
    distance = "PIX" if len(below) <= 2 else "PXB"
    if DISTANCES.index(distance) > DISTANCES.index(max_distance if max_distance in DISTANCES else "PXB"):
        return []
    return [a for a in below if _port_type_of(root, a) in (DOWNSTREAM_PORT, None)]


def read_acs(root, address):
    """{address, control (None: no ACS capability, or unreadable), readable}: one bridge's ACS Control."""
    try:
        with open(os.path.join(root, "sys/bus/pci/devices", address, "config"), "rb") as handle:
            config = handle.read(4096)
    except OSError:
        return {"address": address, "control": None, "readable": False}
    return {"address": address, "control": acs_control(config), "readable": len(config) > 0x100}


def read_gpu_nic_paths(root, links, max_distance="PXB"):
    """[{gpu, nic, bridges: [read_acs of each]}] for every GPU and RDMA NIC of ``links`` (read_links' result) that
    meet in a PCIe switch (path_bridges)."""
    gpus = [d["address"] for d in links if d["role"] == "GPU"]
    nics = [d["address"] for d in links if d["role"].startswith("RDMA NIC")]
    return [
        {
            "gpu": gpu,
            "nic": nic,
            "bridges": [read_acs(root, bridge) for bridge in path_bridges(root, gpu, nic, max_distance)],
        }
        for gpu in gpus
        for nic in nics
    ]


# NVIDIA's (Mellanox) network adapters by PCI vendor and class (0x02xxxx a network controller, 0x0207 InfiniBand;
# 0x0c06 an InfiniBand serial-bus controller): present on the bus at boot, before (or without) the RDMA driver that
# makes them /sys/class/infiniband devices.
NVIDIA_NETWORK = "0x15b3"
NETWORK_CLASSES = ("0x02", "0x0c06")


def nvidia_network_functions(root="/"):
    """[{address, vendor, device, class, driver, physfn}] of every NVIDIA (Mellanox) network function on the PCI bus,
    in address order: ``driver`` the bound driver's name (None: unbound), ``physfn`` whether it is a virtual
    function. The one reader of them: GPUDirect's module decision, the adapters mstconfig configures and the
    GPU-NIC paths all filter this list."""
    devices_dir = os.path.join(root, "sys/bus/pci/devices")
    found = []
    for address in sorted(os.listdir(devices_dir)) if os.path.isdir(devices_dir) else []:
        base = os.path.join(devices_dir, address)
        klass = _read(base, "class") or ""
        if _read(base, "vendor") != NVIDIA_NETWORK or not klass.startswith(NETWORK_CLASSES):
            continue
        try:
            driver = os.path.basename(os.readlink(os.path.join(base, "driver")))
        except OSError:
            driver = None
        found.append(
            {
                "address": address,
                "vendor": NVIDIA_NETWORK,
                "device": _read(base, "device") or "",
                "class": klass,
                "driver": driver,
                "physfn": os.path.lexists(os.path.join(base, "physfn")),
            }
        )
    return found


def gpudirect_functions(root="/"):
    """(GPUs, NICs): the addresses of every NVIDIA GPU and of every RDMA NIC, the latter from the RDMA devices
    (read_links) and from NVIDIA's network adapters on the bus (nvidia_network_functions)."""
    links = read_links(root)
    gpus = [d["address"] for d in links if d["role"] == "GPU"]
    nics = {d["address"] for d in links if d["role"].startswith("RDMA NIC")}
    nics.update(d["address"] for d in nvidia_network_functions(root))
    return gpus, sorted(nics)


def acs_clear_plan(root="/", max_distance="PXB"):
    """(bridges, refusal): the switch downstream ports between a GPU and an RDMA NIC (path_bridges) whose ACS Control
    has Request or Completion Redirect on, [{address, control}] each once in address order; or, where the IOMMU
    translates for a GPU or NIC of such a pair, no bridge and why: with ACS cleared, their peer-to-peer requests would
    go past the IOMMU that translates their addresses, so they would reach the wrong place, or isolation is lost
    (the collection's ``iommu`` check wants the IOMMU off or in passthrough for GPUDirect RDMA)."""
    gpus, nics = gpudirect_functions(root)
    pairs = {(gpu, nic): path_bridges(root, gpu, nic, max_distance) for gpu in gpus for nic in nics}
    pairs = {pair: bridges for pair, bridges in pairs.items() if bridges}
    devices = sorted({address for pair in pairs for address in pair})
    translated = [a for a in devices if iommu_mode(os.path.join(root, "sys/bus/pci/devices", a)) == "translated"]
    if translated:
        return [], (
            f"the IOMMU translates for {', '.join(translated)} (a DMA domain): with ACS cleared their peer-to-peer "
            "requests would bypass it; boot with iommu=pt (passthrough) or the IOMMU off first"
        )
    found = [read_acs(root, bridge) for bridge in sorted({b for bridges in pairs.values() for b in bridges})]
    return [
        {"address": f["address"], "control": f["control"]} for f in found if (f["control"] or 0) & ACS_REDIRECT
    ], None


def redirecting_bridges(root="/", max_distance="PXB"):
    """The bridges acs_clear_plan would clear (none while the IOMMU translates)."""
    return acs_clear_plan(root, max_distance)[0]


def clear_acs_redirect(root, address):
    """Turn Request and Completion Redirect off in one bridge's ACS Control, leaving its other bits (written through
    sysfs ``config``, as root; ``setpci -s <address> ECAP_ACS+0x6.w=<value>`` does the same). Returns (before,
    after), or None when the bridge has no ACS capability."""
    path = os.path.join(root, "sys/bus/pci/devices", address, "config")
    with open(path, "r+b") as handle:
        config = handle.read(4096)
        offset = acs_offset(config)
        if offset is None:
            return None
        before = int.from_bytes(config[offset + 6 : offset + 8], "little")
        after = before & ~ACS_REDIRECT & 0xFFFF
        if after != before:
            handle.seek(offset + 6)
            handle.write(after.to_bytes(2, "little"))
    return before, after


def main(argv=None):
    """``python3 pcie.py --clear-acs-redirect [--root DIR]``: what the boot unit of role rdma_modules runs (this
    file, installed as it is): clears ACS Request/Completion Redirect on the bridges between GPUs and RDMA NICs, one
    line per bridge on standard output (the journal). Exit 1 when a bridge could not be written."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--clear-acs-redirect" not in argv:
        sys.stderr.write("usage: pcie.py --clear-acs-redirect [--root DIR]\n")
        return 2
    root = argv[argv.index("--root") + 1] if "--root" in argv else "/"
    bridges, refusal = acs_clear_plan(root)
    if refusal:
        sys.stdout.write(f"ACS left as it is: {refusal}\n")
        return 1
    status = 0
    for bridge in bridges:
        try:
            before, after = clear_acs_redirect(root, bridge["address"])
        except (OSError, TypeError) as exc:
            sys.stdout.write(f"{bridge['address']}: ACS Control could not be written: {exc}\n")
            status = 1
            continue
        sys.stdout.write(
            f"{bridge['address']}: ACS Control {before:#06x} -> {after:#06x} ({' '.join(acs_names(before))} -> "
            f"{' '.join(acs_names(after)) or 'none'})\n"
        )
    if not bridges:
        sys.stdout.write("no bridge between a GPU and an RDMA NIC redirects peer-to-peer traffic\n")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
