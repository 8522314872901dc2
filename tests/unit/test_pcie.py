"""PCIe links (module_utils/pcie.py reads, fabric_checks.health.pcie_checks judges) on sysfs trees laid out as the
kernel lays them out: /sys/devices/pci<domain:bus>/<port>/<device> with the link files of drivers/pci/pci-sysfs.c,
/sys/bus/pci/devices/<address> linking there, and /sys/class/infiniband/<device>/device linking to the NIC.

Two trees are captures: the accelerator machine's H200 (tests/fixtures/h200-1gpu/pcie-sysfs.txt: a GPU on the root
bus of a microVM, Gen5 x16) and a kernel-lab q35 VM with two root ports (tests/fixtures/qemu-q35-pcie/: Debian's
kernel, a virtio device behind each port). No machine here has a downtrained link: QEMU's endpoints are capable of
2.5 GT/s x1 only and train to it, so the failing cases are laid out from the H200's values behind a port."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils import gpudirect_acs
from ansible_collections.gpucluster.fabric.plugins.module_utils import pcie as pcie_module
from ansible_collections.gpucluster.fabric.plugins.module_utils.applier import Applier
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_checks import (
    acs_checks,
    health_checks,
    iommu_checks,
    pcie_checks,
)
from ansible_collections.gpucluster.fabric.plugins.module_utils.pcie import (
    acs_control,
    parse_speed,
    read_device,
    read_gpu_nic_paths,
    read_links,
    redirecting_bridges,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CAPTURE = FIXTURES / "h200-1gpu" / "pcie-sysfs.txt"
Q35 = FIXTURES / "qemu-q35-pcie" / "pcie-sysfs.txt"


def _link(speed, width, max_speed, max_width):
    return {
        "current_link_speed": f"{speed} GT/s PCIe",
        "current_link_width": str(width),
        "max_link_speed": f"{max_speed} GT/s PCIe",
        "max_link_width": str(max_width),
    }


def _tree(root, devices, rdma=None):
    """``devices``: {path below sys/devices: files}; every path's last part is bound in sys/bus/pci/devices.
    ``rdma``: {RDMA device name: PCI path} (its ``device`` link)."""
    for path, files in devices.items():
        directory = root / "sys" / "devices" / path
        directory.mkdir(parents=True, exist_ok=True)
        for name, value in files.items():
            (directory / name).write_text(value + "\n")
        bus = root / "sys" / "bus" / "pci" / "devices"
        bus.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(directory, bus), bus / Path(path).name)
    for name, path in (rdma or {}).items():
        device = root / "sys" / "class" / "infiniband" / name
        device.mkdir(parents=True)
        os.symlink(os.path.relpath(root / "sys" / "devices" / path, device), device / "device")
    return str(root)


def _capture_tree(path):
    """{section: files} of a capture whose sections are ``== <name>`` (an address, or a path below sys/devices) and
    ``name: value`` lines (the H200's and the q35 VM's)."""
    tree, files = {}, None
    for line in path.read_text().splitlines():
        if line.startswith("== "):
            files = tree.setdefault(line[3:], {})
        elif files is not None and ": " in line:
            name, value = line.split(": ", 1)
            files[name] = value
    return tree


def test_a_real_kernels_root_ports_are_the_port_above_and_what_is_possible(tmp_path):
    """The q35 capture: the port at 00:08.0 can do 16 GT/s x16 and trained to its device's 2.5 GT/s x1; the device
    can do no more, so its link is as possible (a device of fewer lanes than its slot is not trained down). A
    conventional PCI function (the root bus's virtio devices) has no link to judge."""
    root = _tree(tmp_path, _capture_tree(Q35))
    behind = read_device(root, "0000:01:00.0", "RDMA NIC test")
    assert behind["port"] == {
        "address": "0000:00:08.0", "current_speed": 2.5, "current_width": 1, "max_speed": 16.0, "max_width": 16,
    }  # fmt: skip
    slot_limited = read_device(root, "0000:02:00.0", "RDMA NIC test")
    assert slot_limited["port"]["address"] == "0000:00:09.0" and slot_limited["port"]["max_width"] == 1
    on_root_bus = read_device(root, "0000:00:01.0", "RDMA NIC test")
    assert on_root_bus["port"] is None and set(on_root_bus["link"].values()) == {None}
    checks = pcie_checks("vm1", {"pcie": [behind, slot_limited, on_root_bus]})
    assert [c["status"] for c in checks] == ["passed", "passed", "skipped"], checks
    assert "port 0000:00:08.0 max 16 GT/s x16" in checks[0]["message"] and checks[0]["threshold"] == "2.5 GT/s x1"
    assert checks[2]["message"].startswith("skipped: 0000:00:01.0 (RDMA NIC test) reports no PCIe link")


def test_speeds_in_the_kernels_formats():
    assert parse_speed("32.0 GT/s PCIe") == 32.0 and parse_speed("2.5 GT/s PCIe") == 2.5
    assert parse_speed("8 GT/s") == 8.0  # before Linux 5.3
    assert parse_speed("Unknown") is None and parse_speed("Unknown speed") is None and parse_speed(None) is None


def test_the_h200_capture_runs_at_gen5_x16_as_possible(tmp_path):
    root = _tree(tmp_path, {"pci0000:00/0000:00:06.0": _capture_tree(CAPTURE)["0000:00:06.0"]})
    links = read_links(root)
    assert [(d["address"], d["role"], d["port"]) for d in links] == [("0000:00:06.0", "GPU", None)]
    assert links[0]["link"] == {"current_speed": 32.0, "current_width": 16, "max_speed": 32.0, "max_width": 16}
    (check,) = pcie_checks("gpu1", {"pcie": links})
    assert check["check"] == "pcie.link[0000:00:06.0]" and check["status"] == "passed", check
    assert check["message"] == "0000:00:06.0 (GPU) runs at 32 GT/s x16, as possible (device max 32 GT/s x16)"


def test_a_nic_trained_down_fails_naming_its_address_now_and_possible(tmp_path):
    nic = {"vendor": "0x15b3", "device": "0x1021", "class": "0x020700", **_link("16.0", 8, "32.0", 16)}
    port = {"vendor": "0x10b5", "device": "0xc030", "class": "0x060400", **_link("16.0", 8, "32.0", 16)}
    root = _tree(
        tmp_path,
        {"pci0000:16/0000:16:01.0": port, "pci0000:16/0000:16:01.0/0000:17:00.0": nic},
        rdma={"mlx5_0": "pci0000:16/0000:16:01.0/0000:17:00.0"},
    )
    links = read_links(root)
    assert [(d["address"], d["role"]) for d in links] == [("0000:17:00.0", "RDMA NIC mlx5_0")]
    assert links[0]["port"]["address"] == "0000:16:01.0"
    (check,) = pcie_checks("gpu1", {"pcie": links})
    assert check["status"] == "failed" and check["measured"] == "16 GT/s x8" and check["threshold"] == "32 GT/s x16"
    assert check["message"].startswith(
        "0000:17:00.0 (RDMA NIC mlx5_0) runs at 16 GT/s x8, possible 32 GT/s x16 (device max 32 GT/s x16, port "
        "0000:16:01.0 max 32 GT/s x16): the link trained down; reseat"
    )


def test_a_slot_that_allows_less_is_what_is_possible(tmp_path):
    gpu = {"vendor": "0x10de", "device": "0x2335", "class": "0x030200", **_link("16.0", 16, "32.0", 16)}
    port = {"vendor": "0x8086", "device": "0x347a", "class": "0x060400", **_link("16.0", 16, "16.0", 16)}
    root = _tree(tmp_path, {"pci0000:30/0000:30:02.0": port, "pci0000:30/0000:30:02.0/0000:31:00.0": gpu})
    (check,) = pcie_checks("gpu1", {"pcie": read_links(root)})
    assert check["status"] == "passed" and check["threshold"] == "16 GT/s x16", check
    assert "port 0000:30:02.0 max 16 GT/s x16" in check["message"]


def test_an_idle_gpus_lower_speed_is_not_a_fault_but_missing_lanes_are(tmp_path):
    idle = {"vendor": "0x10de", "device": "0x2335", "class": "0x030200", **_link("2.5", 16, "32.0", 16)}
    narrow = dict(idle, **_link("32.0", 8, "32.0", 16))
    root = _tree(tmp_path, {"pci0000:00/0000:00:06.0": idle, "pci0000:00/0000:00:07.0": narrow})
    checks = {c["check"]: c for c in pcie_checks("gpu1", {"pcie": read_links(root)})}
    assert checks["pcie.link[0000:00:06.0]"]["status"] == "skipped"
    assert "an idle NVIDIA GPU lowers its link speed itself" in checks["pcie.link[0000:00:06.0]"]["message"]
    assert checks["pcie.link[0000:00:07.0]"]["status"] == "failed"


def test_virtual_rdma_devices_and_hosts_without_gpus_say_so(tmp_path):
    (tmp_path / "sys" / "class" / "infiniband" / "rxe0").mkdir(parents=True)  # Soft-RoCE: no PCI device link
    links = read_links(str(tmp_path))
    assert links == []
    (check,) = pcie_checks("vm1", {"pcie": links})
    assert check["status"] == "skipped" and check["message"] == "skipped: no NVIDIA GPU and no PCI RDMA device"
    assert pcie_checks("vm1", {}) == []  # not read (a record of another version): no check
    assert "pcie.link" in [c["check"] for c in health_checks("vm1", {"pcie": links}, {})]


def test_this_machines_own_sysfs_reads_without_error():
    """The real kernel's /sys here (virtio devices on the root bus, no GPU, no RDMA device): nothing to judge, and
    reading it does not fail on functions whose link files the kernel refuses to read."""
    links = read_links("/")
    assert all(set(d) == {"address", "role", "vendor", "device", "class", "link", "port", "iommu"} for d in links)


def _with_iommu_group(root, address, kind):
    """The kernel's layout: /sys/kernel/iommu_groups/<n>/type, and the device's iommu_group link to it."""
    group = Path(root) / "sys" / "kernel" / "iommu_groups" / "7"
    group.mkdir(parents=True, exist_ok=True)
    if kind is not None:
        (group / "type").write_text(kind + "\n")
    device = Path(os.path.realpath(Path(root) / "sys" / "bus" / "pci" / "devices" / address))
    os.symlink(os.path.relpath(group, device), device / "iommu_group")


@pytest.mark.parametrize(
    ("kind", "mode"), [(None, "unknown"), ("identity", "passthrough"), ("DMA", "translated"), ("DMA-FQ", "translated")]
)
def test_the_iommu_mode_is_the_devices_group_type(tmp_path, kind, mode):
    root = _tree(tmp_path, {"pci0000:00/0000:00:06.0": _capture_tree(CAPTURE)["0000:00:06.0"]})
    assert read_links(root)[0]["iommu"] == "off"  # no group: the H200 microVM, /sys/kernel/iommu_groups empty
    _with_iommu_group(root, "0000:00:06.0", kind)
    assert read_links(root)[0]["iommu"] == mode


def test_a_translating_iommu_fails_gpudirect_and_nothing_else():
    gpu = {"address": "0000:17:00.0", "iommu": "translated"}
    nic = {"address": "0000:18:00.0", "iommu": "passthrough"}
    (failed,) = iommu_checks("gpu1", {"pcie": [gpu, nic], "gpudirect": {"mode": "dmabuf"}})
    assert failed["status"] == "failed" and failed["check"] == "iommu"
    assert failed["message"].startswith("GPUDirect RDMA (dmabuf) with the IOMMU translating for 0000:17:00.0")
    assert "iommu=pt" in failed["message"]
    (fine,) = iommu_checks("gpu1", {"pcie": [dict(gpu, iommu="passthrough"), nic], "gpudirect": {"mode": "peermem"}})
    assert fine["status"] == "passed"
    (without,) = iommu_checks("gpu1", {"pcie": [gpu], "gpudirect": {"mode": "none"}})
    assert without["status"] == "passed" and "GPUDirect RDMA is none, so any mode serves" in without["message"]
    assert iommu_checks("gpu1", {"pcie": []})[0]["status"] == "skipped" and iommu_checks("gpu1", {}) == []


def test_a_real_kernels_iommu_group_types_read_as_their_modes(tmp_path):
    """The kernel-lab captures with an emulated Intel IOMMU: intel_iommu=on puts every device in a DMA-FQ domain
    (translated), iommu=pt in an identity one (passthrough); each laid out as the kernel links it and read back."""
    boots = {}
    for line in (FIXTURES / "qemu-q35-pcie" / "iommu-groups.txt").read_text().splitlines():
        if line.startswith("== "):
            boot = boots.setdefault(line[3:], {})
        elif "group=" in line:
            path, group, kind = line.split()
            boot[path] = (group.split("=", 1)[1], kind.split("=", 1)[1])
    assert set(boots) == {"intel_iommu=on", "intel_iommu=on iommu=pt"}
    for cmdline, mode in (("intel_iommu=on", "translated"), ("intel_iommu=on iommu=pt", "passthrough")):
        root = tmp_path / mode
        devices = {path: {"vendor": "0x1af4"} for path in boots[cmdline]}
        _tree(root, devices)
        for path, (group, kind) in boots[cmdline].items():
            directory = root / "sys" / "kernel" / "iommu_groups" / group
            directory.mkdir(parents=True, exist_ok=True)
            (directory / "type").write_text(kind + "\n")
            device = root / "sys" / "devices" / path
            os.symlink(os.path.relpath(directory, device), device / "iommu_group")
        behind = read_device(str(root), "0000:01:00.0", "RDMA NIC test")
        assert behind["iommu"] == mode


def _acs_boots():
    """{boot: {path below sys/devices: config bytes}} of the kernel-lab capture."""
    boots, boot, path = {}, None, None
    for line in (FIXTURES / "qemu-q35-pcie" / "acs-config.txt").read_text().splitlines():
        if line.startswith("=== "):
            boot = boots.setdefault(line[4:], {})
        elif line.startswith("== "):
            path = line[3:]
        elif path and not line.startswith("#"):
            boot[path], path = bytes.fromhex(line), None
    return boots


def _acs_tree(root, configs, config_bytes=None):
    """The capture's tree, its two endpoints standing in for a GPU (00:08.0's) and an RDMA NIC (00:09.0's); the
    root ports' configuration space is the real one (or the first ``config_bytes`` of it)."""
    gpu = "pci0000:00/0000:00:08.0/0000:01:00.0"
    nic = "pci0000:00/0000:00:09.0/0000:02:00.0"
    files = {path: {"vendor": "0x1b36", "class": "0x060400"} for path in configs}
    files[gpu] = {"vendor": "0x10de", "device": "0x2335", "class": "0x030200", **_link("2.5", 1, "2.5", 1)}
    files[nic] = {"vendor": "0x15b3", "device": "0x1021", "class": "0x020700", **_link("2.5", 1, "2.5", 1)}
    _tree(root, files, rdma={"mlx5_0": nic})
    for path, config in configs.items():
        (root / "sys" / "devices" / path / "config").write_bytes(config[:config_bytes])
    return str(root)


def test_a_real_kernels_root_ports_are_never_judged_or_cleared(tmp_path):
    """A real kernel's root ports (kernel lab, q35): with intel_iommu=on Linux turns ACS on them on (Source
    Validation, Request and Completion Redirect, Upstream Forwarding: 0x1d); without an IOMMU it leaves it off. A GPU
    and a NIC behind two root ports meet at the root complex, which their traffic crosses whatever ACS says: no
    bridge of theirs is judged or cleared (clearing a root port takes the isolation from all below it)."""
    boots = _acs_boots()
    assert [acs_control(c) for c in boots["intel_iommu=on"].values()] == [0x1D, 0x1D, None, None]
    assert [acs_control(c) for c in boots["no IOMMU"].values()] == [0, 0, None, None]
    assert [pcie_module.port_type(c) for c in boots["intel_iommu=on"].values()] == [4, 4, 0, 0]  # root ports
    assert pcie_module.port_type(boots["no IOMMU"]["pci0000:00/0000:00:08.0"][:64]) is None  # a user's read
    on = _acs_tree(tmp_path / "on", boots["intel_iommu=on"])
    links = read_links(on)
    assert [d["role"] for d in links] == ["GPU", "RDMA NIC mlx5_0"]
    paths = read_gpu_nic_paths(on, links)
    assert [(p["gpu"], p["nic"], p["bridges"]) for p in paths] == [("0000:01:00.0", "0000:02:00.0", [])]
    (skipped,) = acs_checks("gpu1", {"pcie_paths": paths, "gpudirect": {"mode": "dmabuf"}})
    assert (
        skipped["status"] == "skipped" and "none of the 1 GPU-NIC pair(s) meets in a PCIe switch" in skipped["message"]
    )
    assert redirecting_bridges(on) == []
    assert acs_checks("gpu1", {"pcie_paths": []})[0]["status"] == "skipped" and acs_checks("gpu1", {}) == []


def _with_port_type(config, kind):
    """A real root port's configuration space (the q35 capture's) as a port of another Device/Port Type: the same
    capability lists, the PCI Express capability's type field set to ``kind``."""
    config = bytearray(config)
    offset = config[0x34]
    while config[offset] != 0x10:
        offset = config[offset + 1]
    config[offset + 2] = (config[offset + 2] & 0x0F) | (kind << 4)
    return bytes(config)


def _two_socket_tree(root, config_bytes=None):
    """Two sockets, each a root port, a PCIe switch (upstream port, two downstream ports) and a GPU and an RDMA NIC
    behind it; an NVMe drive behind a root port of its own on the first. Every port has ACS on as Linux leaves it
    with an IOMMU on (the q35 capture's real configuration space, 0x1d), typed as the port it stands for."""
    port = _acs_boots()["intel_iommu=on"]["pci0000:00/0000:00:08.0"]
    kinds = {}
    devices = {}
    for bus, domain in (("0", "pci0000:00"), ("8", "pci0000:80")):
        rp, usp = f"{domain}/0000:{bus}0:01.0", f"{domain}/0000:{bus}0:01.0/0000:{bus}1:00.0"
        kinds.update({rp: 4, usp: 5, f"{usp}/0000:{bus}2:00.0": 6, f"{usp}/0000:{bus}2:01.0": 6})
        devices[f"{usp}/0000:{bus}2:00.0/0000:{bus}3:00.0"] = {"vendor": "0x10de", "class": "0x030200"}
        devices[f"{usp}/0000:{bus}2:01.0/0000:{bus}4:00.0"] = {"vendor": "0x15b3", "class": "0x020700"}
    kinds["pci0000:00/0000:00:02.0"] = 4
    devices["pci0000:00/0000:00:02.0/0000:05:00.0"] = {"vendor": "0x144d", "class": "0x010802"}  # NVMe
    files = {path: {"vendor": "0x8086", "class": "0x060400"} for path in kinds}
    nics = {f"mlx5_{i}": next(p for p in devices if p.endswith(f"{bus}4:00.0")) for i, bus in enumerate("08")}
    _tree(root, {**files, **devices}, rdma=nics)
    for path, kind in kinds.items():
        (root / "sys" / "devices" / path / "config").write_bytes(_with_port_type(port, kind)[:config_bytes])
    return str(root)


SWITCH_DOWNSTREAM = ["0000:02:00.0", "0000:02:01.0", "0000:82:00.0", "0000:82:01.0"]


def test_acs_redirect_on_the_switch_ports_between_gpu_and_nic_fails_gpudirect(tmp_path):
    """The two-socket tree: the GPU-NIC pairs that meet in a switch (one per socket) cross its two downstream ports;
    the cross-socket pairs meet at no switch. ACS redirect on those four ports fails GPUDirect RDMA; the root ports,
    the upstream ports and the NVMe drive's port are not judged."""
    tree = _two_socket_tree(tmp_path / "tree")
    paths = read_gpu_nic_paths(tree, read_links(tree))
    assert {(p["gpu"], p["nic"]): [b["address"] for b in p["bridges"]] for p in paths} == {
        ("0000:03:00.0", "0000:04:00.0"): ["0000:02:00.0", "0000:02:01.0"],
        ("0000:03:00.0", "0000:84:00.0"): [],
        ("0000:83:00.0", "0000:04:00.0"): [],
        ("0000:83:00.0", "0000:84:00.0"): ["0000:82:00.0", "0000:82:01.0"],
    }
    assert read_gpu_nic_paths(tree, read_links(tree), "PIX") == paths  # one switch each: PIX
    (failed,) = acs_checks("gpu1", {"pcie_paths": paths, "gpudirect": {"mode": "dmabuf"}})
    assert failed["status"] == "failed" and failed["measured"] == SWITCH_DOWNSTREAM
    assert failed["message"].startswith(
        "ACS redirects peer-to-peer traffic on 4 bridge(s) between the GPUs and NICs: 0000:02:00.0 (SrcValid, "
        "ReqRedir, CmpltRedir, UpstreamFwd)"
    )
    (off,) = acs_checks("gpu1", {"pcie_paths": paths, "gpudirect": {"mode": "none"}})
    assert off["status"] == "skipped" and off["measured"] == SWITCH_DOWNSTREAM
    unread = _two_socket_tree(tmp_path / "user", config_bytes=64)  # what a non-root read gets
    (skipped,) = acs_checks(
        "gpu1", {"pcie_paths": read_gpu_nic_paths(unread, read_links(unread)), "gpudirect": {"mode": "dmabuf"}}
    )
    assert skipped["status"] == "skipped" and "(run as root)" in skipped["message"]


class _Applying:
    """What gpudirect_acs.apply uses of AnsibleModule: not in check mode, no systemctl (the tree is not /)."""

    check_mode = False
    _diff = False
    params = {}

    @staticmethod
    def get_bin_path(_name):
        return None

    @staticmethod
    def atomic_move(src, dest):
        os.replace(src, dest)


def test_acs_clearing_turns_only_the_redirect_bits_off_on_the_switch_ports_now_and_at_boot(tmp_path):
    """The two-socket tree: clearing keeps Source Validation and Upstream Forwarding (0x11) on the four switch
    downstream ports only (root ports, upstream ports and the NVMe drive's port keep 0x1d), after which the check
    passes; the unit runs this very file."""
    tree = _two_socket_tree(tmp_path / "on")

    def controls(root):
        found = {}
        for path in Path(root, "sys/bus/pci/devices").iterdir():
            config = Path(path, "config")
            if config.exists():
                found[path.name] = acs_control(config.read_bytes())
        return found

    before = controls(tree)
    assert [b["address"] for b in redirecting_bridges(tree)] == SWITCH_DOWNSTREAM
    applier = Applier(_Applying(), root=tree)
    outcome = gpudirect_acs.apply(_Applying(), applier, True, "# Ansible managed")
    assert outcome["bridges"] == [{"address": a, "before": 0x1D, "after": 0x11} for a in SWITCH_DOWNSTREAM]
    package = gpudirect_acs.CODE.rsplit("/", 1)[0]
    assert [c["what"] for c in applier.changes] == [
        package.rsplit("/", 1)[0],  # the node's one library, then the package of its own
        package,
        f"{package}/__init__.py",
        gpudirect_acs.CODE,
        gpudirect_acs.UNIT_FILE,
        *(f"ACS {a}" for a in SWITCH_DOWNSTREAM),
    ]
    after = controls(tree)
    assert {a for a in after if after[a] != before[a]} == set(SWITCH_DOWNSTREAM)
    assert after["0000:00:01.0"] == after["0000:01:00.0"] == after["0000:00:02.0"] == 0x1D  # root, upstream, NVMe
    assert redirecting_bridges(tree) == []
    paths = read_gpu_nic_paths(tree, read_links(tree))
    (passed,) = acs_checks("gpu1", {"pcie_paths": paths, "gpudirect": {"mode": "dmabuf", "acs_clear": True}})
    assert passed["status"] == "passed" and "cleared at every boot by gpucluster-acs-clear.service" in passed["message"]
    unit = Path(tree, gpudirect_acs.UNIT_FILE.lstrip("/")).read_text()
    assert f"ExecStart=/usr/bin/python3 {gpudirect_acs.CODE} --clear-acs-redirect" in unit
    installed = Path(tree, gpudirect_acs.CODE.lstrip("/"))
    assert installed.read_text() == Path(pcie_module.__file__).read_text()

    # The boot: the installed file itself, as the unit runs it, on a tree whose ports got their ACS back.
    again = _two_socket_tree(tmp_path / "boot")
    run = subprocess.run(
        [sys.executable, "-I", str(installed), "--clear-acs-redirect", "--root", again],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == (
        "0000:02:00.0: ACS Control 0x001d -> 0x0011 (SrcValid ReqRedir CmpltRedir UpstreamFwd -> SrcValid UpstreamFwd)"
    )
    assert len(run.stdout.splitlines()) == 4 and redirecting_bridges(again) == []

    # Nothing left to clear: no change; turned off: the unit and its code go (the ACS comes back at the next boot).
    applier = Applier(_Applying(), root=tree)
    assert gpudirect_acs.apply(_Applying(), applier, True, "# Ansible managed")["bridges"] == []
    assert not applier.changes
    applier = Applier(_Applying(), root=tree)
    gpudirect_acs.apply(_Applying(), applier, False, "# Ansible managed")
    assert [c["what"] for c in applier.changes] == [package, gpudirect_acs.UNIT_FILE]
    assert [c["why"] for c in applier.changes] == ["it is not wanted (removed)"] * 2
    assert not Path(tree, gpudirect_acs.UNIT_FILE.lstrip("/")).exists()
    assert not Path(tree, package.lstrip("/")).exists() and Path(tree, package.rsplit("/", 1)[0].lstrip("/")).is_dir()


class _Failed(Exception):
    pass


class _Failing(_Applying):
    @staticmethod
    def fail_json(msg, **result):
        raise _Failed(msg, result)


def test_acs_is_left_as_it_is_while_the_iommu_translates_for_the_pair_and_the_refusal_says_why(tmp_path):
    tree = _two_socket_tree(tmp_path / "tree")
    _with_iommu_group(tree, "0000:03:00.0", "DMA")
    bridges, refusal = pcie_module.acs_clear_plan(tree)
    assert bridges == [] and refusal.startswith("the IOMMU translates for 0000:03:00.0 (a DMA domain)")
    (error,) = gpudirect_acs.errors(True, "dmabuf", tree, "gpu1: ")
    assert error.startswith("gpu1: rdma_modules_acs_clear is set, but the IOMMU translates for 0000:03:00.0")
    assert "boot with iommu=pt (passthrough) or the IOMMU off first" in error
    with pytest.raises(_Failed, match="ACS left as it is: the IOMMU translates"):
        gpudirect_acs.apply(_Failing(), Applier(_Failing(), root=tree), True, "# Ansible managed")
    run = subprocess.run(
        [sys.executable, "-I", pcie_module.__file__, "--clear-acs-redirect", "--root", tree],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 1 and run.stdout.startswith("ACS left as it is: the IOMMU translates for 0000:03:00.0")
    assert redirecting_bridges(tree) == [] and pcie_module.acs_clear_plan(tmp_path / "none")[1] is None


def test_a_partial_acs_clear_is_reported_as_one(tmp_path, monkeypatch):
    tree = _two_socket_tree(tmp_path / "tree")
    real = pcie_module.clear_acs_redirect

    def clear(root, address):
        if address == "0000:82:01.0":
            raise OSError(5, "Input/output error")
        return real(root, address)

    monkeypatch.setattr(pcie_module, "clear_acs_redirect", clear)
    with pytest.raises(_Failed) as failed:
        gpudirect_acs.apply(_Failing(), Applier(_Failing(), root=tree), True, "# Ansible managed")
    message, result = failed.value.args
    assert message.startswith("rdma_modules_acs_clear: ACS cleared on 3 of 4 bridge(s) (0000:02:00.0, 0000:02:01.0, ")
    assert "not on 0000:82:01.0 (Input/output error)" in message and result["changed"] is True


def test_acs_clearing_is_refused_without_a_gpudirect_path(tmp_path):
    on = _acs_tree(tmp_path / "on", _acs_boots()["intel_iommu=on"])
    assert gpudirect_acs.errors(True, "dmabuf", on) == []
    assert gpudirect_acs.errors(False, "none", on) == []
    (off,) = gpudirect_acs.errors(True, "none", on, "gpu1: ")
    assert off.startswith("gpu1: rdma_modules_acs_clear is set, but GPUDirect RDMA is off on this host (mode none)")
    bare = _tree(tmp_path / "bare", {"pci0000:00/0000:00:09.0": {"vendor": "0x1b36", "class": "0x060400"}})
    (no_path,) = gpudirect_acs.errors(True, "dmabuf", bare, "gpu1: ")
    assert "this host has no GPUDirect path (0 NVIDIA GPU, 0 RDMA NIC on its PCI bus)" in no_path


def test_one_reader_of_nvidias_network_functions_serves_gpudirect_firmware_and_the_paths(tmp_path):
    """An Ethernet/InfiniBand adapter (0x0207), an InfiniBand serial-bus controller (0x0c06), a virtual function, an
    adapter's second port and another vendor's NIC: GPUDirect's module decision, the adapters mstconfig configures
    and the GPU-NIC paths read the same list (pcie.nvidia_network_functions), each taking what it needs."""
    from ansible_collections.gpucluster.fabric.plugins.module_utils import gpudirect, hca_firmware

    nic = {"vendor": "0x15b3", "device": "0x1021", "class": "0x020700"}
    root = _tree(
        tmp_path,
        {
            "pci0000:16/0000:16:01.0/0000:17:00.0": nic,
            "pci0000:16/0000:16:01.0/0000:17:00.1": nic,
            "pci0000:16/0000:16:01.0/0000:17:00.2": nic,
            "pci0000:30/0000:30:01.0/0000:31:00.0": {"vendor": "0x15b3", "device": "0x1003", "class": "0x0c0600"},
            "pci0000:40/0000:40:01.0/0000:41:00.0": {"vendor": "0x8086", "device": "0x1593", "class": "0x020000"},
        },
    )
    os.symlink("../0000:17:00.0", tmp_path / "sys/devices/pci0000:16/0000:16:01.0/0000:17:00.2/physfn")
    found = pcie_module.nvidia_network_functions(root)
    assert [(d["address"], d["physfn"]) for d in found] == [
        ("0000:17:00.0", False), ("0000:17:00.1", False), ("0000:17:00.2", True), ("0000:31:00.0", False),
    ]  # fmt: skip
    assert [d["address"] for d in gpudirect.pci_rdma_devices(gpudirect.RootTree(root))] == [d["address"] for d in found]
    assert hca_firmware.adapters(root) == ["0000:17:00.0", "0000:31:00.0"]
    assert pcie_module.gpudirect_functions(root)[1] == [d["address"] for d in found]
