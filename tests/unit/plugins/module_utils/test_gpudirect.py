"""GPUDirect RDMA decision table, on root trees assembled from real-format inputs.

Real captures used (tests/fixtures/gpudirect/):
- h200-firecracker/: a live H200 host (driver 580.159.04 open kernel module, built-in inbox ib_core, Ubuntu 24.04
  libibverbs1 50.0, held libnccl2 2.28.3, kernel.modules_disabled=1, in a container).
- debian/dpkg-status-{bookworm,bullseye}-rdma-core.txt: `dpkg-query --status rdma-core libibverbs1 ibverbs-providers`
  after installing rdma-core in the lab images (44.0-2 and 33.2-1).
- debian/modules.dep-6.1.0-50-amd64-rdma.txt: the RDMA lines of `depmod` output for Debian's 6.1.0-50-amd64 kernel.
MLNX_OFED/DOCA trees are the same formats with the paths DKMS installs to (updates/dkms/).
"""

import os

import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils import gpudirect as gd

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "gpudirect")
H200 = os.path.join(FIXTURES, "h200-firecracker")


def fixture(*parts):
    with open(os.path.join(FIXTURES, *parts), encoding="utf-8") as handle:
        return handle.read()


NVIDIA_OPEN = fixture("h200-firecracker", "proc", "driver", "nvidia", "version")
# Proprietary module, as printed by driver 515.76 and 535.104.05 (two- and three-part versions).
NVIDIA_PROPRIETARY = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
    "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
)
NCCL_STANZA = fixture("h200-firecracker", "var", "lib", "dpkg", "status").split("Package: libnccl2")[1].split("\n\n")[0]
DEP_INBOX = fixture("debian", "modules.dep-6.1.0-50-amd64-rdma.txt")
# MLNX_OFED/DOCA: DKMS puts its ib_core (and friends) in updates/dkms/, which depmod ranks above kernel/.
DEP_OFED = (
    "\n".join(
        line.replace("kernel/drivers/infiniband/core/", "updates/dkms/").replace(
            "kernel/drivers/infiniband/hw/mlx5/", "updates/dkms/"
        )
        for line in DEP_INBOX.splitlines()
        if "/ib_core.ko:" not in line
    )
    + "\nupdates/dkms/ib_core.ko: updates/dkms/mlx_compat.ko\n"
)
PEERMEM_DEP = "kernel/drivers/video/nvidia-peermem.ko: kernel/drivers/video/nvidia.ko updates/dkms/ib_core.ko\n"
NVIDIA_DEP = "kernel/drivers/video/nvidia.ko:\n"
OFED_DKMS_STANZA = (
    "\nPackage: mlnx-ofed-kernel-dkms\nStatus: install ok installed\nVersion: 24.10.OFED.24.10.1.1.4.1-1\n"
)
# /proc/kallsyms lines: address, type, name, and [module] for symbols of loadable modules.
KALLSYMS_PEER = (
    "ffffffffc0a1b2c3 T ib_register_client\t[ib_core]\nffffffffc0a1b4d0 T ib_register_peer_memory_client\t[ib_core]\n"
)


def nccl_status(version):
    return "Package: libnccl2" + NCCL_STANZA.replace("2.28.3-1+cuda13.0", version) + "\n"


def build_root(
    tmp_path,
    release="6.1.0-50-amd64",
    dpkg="bookworm",
    nvidia="open",
    ib_core="inbox-available",
    peermem=True,
    nccl="2.28.3-1+cuda13.0",
    extra_status="",
    kallsyms=None,
):
    """A root tree: /proc, /sys/module, /lib/modules/<release>/modules.dep and /var/lib/dpkg/status."""
    root = tmp_path / "root"

    def write(rel, text):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    write("proc/sys/kernel/osrelease", release + "\n")
    proc_modules = []
    status = fixture("debian", f"dpkg-status-{dpkg}-rdma-core.txt") if dpkg else ""
    if nccl:
        status += "\n" + nccl_status(nccl)
    write("var/lib/dpkg/status", status + extra_status)
    dep = DEP_OFED if ib_core.startswith("ofed") else DEP_INBOX
    if nvidia in ("open", "proprietary"):
        write("proc/driver/nvidia/version", NVIDIA_OPEN if nvidia == "open" else NVIDIA_PROPRIETARY)
        proc_modules.append("nvidia 14299136 0 - Live 0xffffffffc0400000 (POE)")
        dep += NVIDIA_DEP
    elif nvidia == "installed":
        dep += NVIDIA_DEP
    if peermem and nvidia:
        dep += PEERMEM_DEP
    if ib_core.endswith("loaded"):
        taint = "O" if ib_core.startswith("ofed") else ""
        proc_modules.append("ib_core 401408 8 - Live 0xffffffffc0b00000" + (f" ({taint})" if taint else ""))
        write("sys/module/ib_core/initstate", "live\n")
        write("sys/module/ib_core/taint", taint + "\n")
    write("proc/modules", "".join(line + "\n" for line in proc_modules))
    write(f"lib/modules/{release}/modules.dep", dep)
    if kallsyms is not None:
        write("proc/kallsyms", kallsyms)
    return str(root)


def decide_for(tmp_path, requested="auto", nccl_version=None, probe=None, **tree):
    facts = gd.gather(build_root(tmp_path, **tree), nccl_version=nccl_version, runtime_probe=probe)
    return facts, gd.decide(facts, requested)


# kernel / rdma-core / ib_core / NVIDIA module / NCCL -> auto mode, and what the reason must say.
AUTO_TABLE = [
    pytest.param(
        {},
        "dmabuf",
        [
            "kernel 6.1.0-50-amd64 >= 5.12",
            "rdma-core 44.0 >= 34",
            "open NVIDIA kernel module 580.159.04",
            "NCCL 2.28.3",
        ],
        id="bookworm-open-inbox-nccl228",
    ),
    pytest.param(
        {"ib_core": "ofed-available"},
        "dmabuf",
        ["nvidia-peermem would work too", "recommended"],
        id="bookworm-open-ofed-prefers-dmabuf",
    ),
    pytest.param(
        {"release": "5.10.0-28-amd64", "dpkg": "bullseye"},
        "none",
        ["kernel 5.10.0-28-amd64 < 5.12", "rdma-core 33.2 < 34", "inbox", "without the PeerDirect API"],
        id="bullseye-open-inbox",
    ),
    pytest.param(
        {"release": "5.10.0-28-amd64", "dpkg": "bullseye", "ib_core": "ofed-available"},
        "peermem",
        ["DMA-BUF is not possible", "kernel 5.10.0-28-amd64 < 5.12", "MLNX_OFED/DOCA", "updates/dkms/ib_core.ko"],
        id="bullseye-open-ofed",
    ),
    pytest.param(
        {"release": "5.11.0-49-generic"},
        "none",
        ["kernel 5.11.0-49-generic < 5.12"],
        id="kernel-5.11-just-below",
    ),
    pytest.param({"release": "5.12.0-1-amd64"}, "dmabuf", ["kernel 5.12.0-1-amd64 >= 5.12"], id="kernel-5.12-exact"),
    pytest.param(
        {"nvidia": "proprietary"},
        "none",
        ["535.104.05 is the proprietary one", "open GPU kernel modules", "inbox"],
        id="bookworm-proprietary-inbox",
    ),
    pytest.param(
        {"nvidia": "proprietary", "ib_core": "ofed-loaded"},
        "peermem",
        ["proprietary", "out-of-tree (taint O)"],
        id="bookworm-proprietary-ofed-loaded",
    ),
    pytest.param({"nccl": "2.12.12-1+cuda11.7"}, "none", ["NCCL 2.12.12 < 2.13", "inbox"], id="nccl-2.12-inbox"),
    pytest.param(
        {"nccl": "2.12.12-1+cuda11.7", "ib_core": "ofed-available"},
        "peermem",
        ["NCCL 2.12.12 < 2.13"],
        id="nccl-2.12-ofed",
    ),
    pytest.param({"nccl": "2.13.4-1+cuda11.7"}, "dmabuf", ["NCCL 2.13.4 >= 2.13"], id="nccl-2.13-exact"),
    pytest.param({"nccl": None}, "dmabuf", ["NCCL version unknown", "must be >= 2.13"], id="nccl-unknown"),
    pytest.param(
        {"nvidia": None},
        "none",
        ["no NVIDIA kernel driver", "/proc/driver/nvidia/version is absent"],
        id="no-nvidia-driver",
    ),
    pytest.param({"dpkg": None}, "none", ["rdma-core not installed"], id="no-rdma-core"),
    pytest.param(
        {"release": "5.4.0-216-generic", "dpkg": "bullseye", "ib_core": "ofed-available"},
        "peermem",
        ["kernel 5.4.0-216-generic < 5.12"],
        id="ubuntu2004-kernel-ofed",
    ),
    pytest.param(
        {
            "ib_core": "inbox-loaded",
            "nvidia": "proprietary",
            "peermem": True,
            "extra_status": OFED_DKMS_STANZA,
        },
        "none",
        ["MLNX_OFED/DOCA is installed but its ib_core is not the one in use", "rebuild or reinstall it for kernel"],
        id="ofed-installed-but-inbox-ib_core-after-kernel-update",
    ),
    pytest.param(
        {"nvidia": "proprietary", "peermem": False, "ib_core": "ofed-available"},
        "none",
        ["no nvidia-peermem.ko", "R470"],
        id="ofed-without-peermem-module",
    ),
    pytest.param(
        {
            "nvidia": "proprietary",
            "ib_core": "inbox-loaded",
            "kallsyms": KALLSYMS_PEER,
        },
        "peermem",
        ["ib_register_peer_memory_client present in /proc/kallsyms"],
        id="peer-symbol-in-kallsyms",
    ),
    pytest.param(
        {
            "nvidia": "proprietary",
            "ib_core": "ofed-loaded",
            "kallsyms": "ffffffffc0a1b2c3 T ib_register_client\t[ib_core]\n",
        },
        "none",
        ["ib_register_peer_memory_client absent in /proc/kallsyms"],
        id="out-of-tree-ib_core-without-peer-symbol",
    ),
]


@pytest.mark.parametrize(("tree", "mode", "reason_parts"), AUTO_TABLE)
def test_auto_decision(tmp_path, tree, mode, reason_parts):
    _facts, decision = decide_for(tmp_path, **tree)
    assert decision["mode"] == mode, decision["reason"]
    for part in reason_parts:
        assert part in decision["reason"]
    assert decision["errors"] == []
    assert decision["warnings"] == []


def test_given_nccl_version_beats_dpkg(tmp_path):
    facts, decision = decide_for(tmp_path, nccl_version="21206", ib_core="ofed-available")
    assert facts["nccl"] == {"version": "2.12.6", "source": "given"}
    assert decision["mode"] == "peermem"


@pytest.mark.parametrize(
    ("license_text", "mode"),
    [("Dual MIT/GPL", "dmabuf"), ("NVIDIA", "none"), (None, "none")],
    ids=["open-not-loaded", "proprietary-not-loaded", "unknown-flavour"],
)
def test_driver_installed_but_not_loaded(tmp_path, license_text, mode):
    facts, decision = decide_for(tmp_path, nvidia="installed", probe={"nvidia_license": license_text})
    assert facts["nvidia"]["present"] is True and facts["nvidia"]["loaded"] is False
    assert decision["mode"] == mode
    if license_text is None:
        assert "flavour unknown" in decision["reason"]


def test_real_h200_host_decides_dmabuf():
    facts = gd.gather(H200)
    assert facts["kernel"]["release"] == "6.18.44-fc-v657-gpu"
    assert facts["rdma_core"] == {"package": "libibverbs1", "version": "50.0-2ubuntu0.2", "major": 50}
    assert facts["ib_core"]["state"] == "builtin" and facts["ib_core"]["source"] == "inbox"
    assert facts["nvidia"] == {
        "present": True,
        "loaded": True,
        "version": "580.159.04",
        "open": True,
        "evidence": "/proc/driver/nvidia/version",
    }
    assert facts["nccl"] == {"version": "2.28.3", "source": "dpkg libnccl2"}
    assert facts["peermem"] == {"loaded": False, "available": False, "path": None, "persisted_in": []}
    assert facts["runtime_load"]["possible"] is False
    assert facts["hca"] == []
    decision = gd.decide(facts)
    assert decision["mode"] == "dmabuf"
    peermem = gd.decide(facts, "peermem")
    assert peermem["mode"] == "peermem" and peermem["warnings"]
    assert "built into the kernel" in peermem["warnings"][0]


# --- explicit modes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("requested", ["peermem", "dmabuf"])
def test_forced_mode_without_nvidia_driver_is_an_error(tmp_path, requested):
    _facts, decision = decide_for(tmp_path, requested=requested, nvidia=None)
    assert decision["mode"] is None
    assert len(decision["errors"]) == 1
    assert f"GPUDirect mode {requested} was requested but there is no NVIDIA kernel driver" in decision["errors"][0]
    assert "install the NVIDIA driver" in decision["errors"][0]


def test_none_is_always_honoured(tmp_path):
    _facts, decision = decide_for(tmp_path, requested="none", nvidia=None)
    assert decision == {
        "mode": "none",
        "reason": "GPUDirect RDMA turned off by request (mode none)",
        "errors": [],
        "warnings": [],
    }


def test_forced_dmabuf_against_the_facts_warns(tmp_path):
    _facts, decision = decide_for(tmp_path, requested="dmabuf", release="5.10.0-28-amd64", dpkg="bullseye")
    assert decision["mode"] == "dmabuf"
    assert decision["warnings"] == [
        "DMA-BUF requested but not supported here: kernel 5.10.0-28-amd64 < 5.12; rdma-core 33.2 < 34"
    ]


def test_forced_peermem_on_inbox_warns(tmp_path):
    _facts, decision = decide_for(tmp_path, requested="peermem")
    assert decision["mode"] == "peermem"
    assert "without the PeerDirect API" in decision["warnings"][0]


def test_forced_peermem_on_ofed_is_clean(tmp_path):
    _facts, decision = decide_for(tmp_path, requested="peermem", ib_core="ofed-loaded")
    assert decision["mode"] == "peermem" and decision["warnings"] == []


def test_unknown_mode_is_an_error(tmp_path):
    _facts, decision = decide_for(tmp_path, requested="gdrcopy")
    assert decision["mode"] is None
    assert "unknown GPUDirect mode 'gdrcopy'" in decision["errors"][0]


# --- parsers -----------------------------------------------------------------------------------------------


def test_parse_nvidia_version_real_open_module():
    assert gd.parse_nvidia_version(NVIDIA_OPEN) == {"version": "580.159.04", "open": True, "arch": "x86_64"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (NVIDIA_PROPRIETARY, {"version": "535.104.05", "open": False, "arch": "x86_64"}),
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  515.76  Mon Sep 12 19:21:56 UTC 2022\n",
            {"version": "515.76", "open": False, "arch": "x86_64"},
        ),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.65.06  Release Build  (dvs-builder@U22)\n",
            {"version": "580.65.06", "open": True, "arch": "aarch64"},
        ),
        ("", None),
        ("GCC version:  gcc version 15.3.0 (GCC)\n", None),
    ],
)
def test_parse_nvidia_version(text, expected):
    assert gd.parse_nvidia_version(text) == expected


def test_parse_dpkg_status_real_captures():
    bookworm = gd.parse_dpkg_status(fixture("debian", "dpkg-status-bookworm-rdma-core.txt"))
    bullseye = gd.parse_dpkg_status(fixture("debian", "dpkg-status-bullseye-rdma-core.txt"))
    h200 = gd.parse_dpkg_status(fixture("h200-firecracker", "var", "lib", "dpkg", "status"))
    assert bookworm["rdma-core"]["version"] == "44.0-2"
    assert bullseye["rdma-core"]["version"] == "33.2-1"
    assert h200["libnccl2"] == {"version": "2.28.3-1+cuda13.0", "status": "hold ok installed"}
    assert "rdma-core" not in h200


def test_parse_dpkg_status_skips_removed_packages():
    text = "Package: rdma-core\nStatus: deinstall ok config-files\nVersion: 44.0-2\n"
    assert gd.parse_dpkg_status(text) == {}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2.28.3-1+cuda13.0", (2, 28, 3)),
        ("2.21.5", (2, 21, 5)),
        ("22809", (2, 28, 9)),
        ("21303", (2, 13, 3)),
        ("", None),
        ("latest", None),
    ],
)
def test_parse_nccl_version(text, expected):
    assert gd.parse_nccl_version(text) == expected


@pytest.mark.parametrize(
    ("version", "major"),
    [("44.0-2", 44), ("33.2-1", 33), ("50.0-2ubuntu0.2", 50), ("1:28.0-1ubuntu1", 28), ("2307mlnx47-1.2310036", 2307)],
)
def test_rdma_core_major(version, major):
    assert gd.rdma_core_major(version) == major


def test_parse_modules_dep_real():
    modules = gd.parse_modules_dep(DEP_INBOX)
    assert modules["ib_core"] == "kernel/drivers/infiniband/core/ib_core.ko"
    assert modules["rdma_rxe"] == "kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko"
    assert gd.parse_modules_dep("updates/dkms/nvidia-peermem.ko.zst: x.ko\n") == {
        "nvidia_peermem": "updates/dkms/nvidia-peermem.ko.zst"
    }


def test_parse_proc_modules_real():
    text = fixture("h200-firecracker", "proc", "modules")
    assert gd.parse_proc_modules(text) == {"nvidia_uvm": "O", "nvidia": "O"}


@pytest.mark.parametrize("name", ["ib_core", "nvidia-peermem", "mlx5_ib"])
def test_valid_module_names(name):
    assert gd.valid_module_name(name)


@pytest.mark.parametrize("name", ["", "ib_core; reboot", "$(id)", "a b", "mlx5_ib\n", "../x", "ib_core*"])
def test_invalid_module_names(name):
    assert not gd.valid_module_name(name)


# --- run-time loading and adapters -------------------------------------------------------------------------


def test_runtime_load_without_proc_modules(tmp_path):
    root = build_root(tmp_path)
    os.remove(os.path.join(root, "proc", "modules"))
    assert gd.gather(root)["runtime_load"] == {
        "possible": False,
        "reason": "/proc/modules is absent (kernel without loadable module support)",
    }


@pytest.mark.parametrize("marker", ["run/.containerenv", ".dockerenv", "run/systemd/container"])
def test_runtime_load_in_a_container(tmp_path, marker):
    root = build_root(tmp_path)
    path = os.path.join(root, marker)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").close()
    runtime = gd.gather(root)["runtime_load"]
    assert runtime["possible"] is False and marker in runtime["reason"]


def test_runtime_load_possible_and_needs_modprobe(tmp_path):
    root = build_root(tmp_path)
    assert gd.gather(root, runtime_probe={"modprobe": "/usr/sbin/modprobe"})["runtime_load"]["possible"] is True
    missing = gd.gather(root, runtime_probe={"modprobe": None})["runtime_load"]
    assert missing["possible"] is False and "kmod" in missing["reason"]


def _pci(root, address, vendor, device, pci_class, driver=None):
    base = os.path.join(root, "sys", "bus", "pci", "devices", address)
    os.makedirs(base)
    for name, value in (("vendor", vendor), ("device", device), ("class", pci_class)):
        with open(os.path.join(base, name), "w") as handle:
            handle.write(value + "\n")
    if driver:
        os.symlink("../../../../bus/pci/drivers/" + driver, os.path.join(base, "driver"))


def test_hca_detection(tmp_path):
    root = build_root(tmp_path)
    _pci(root, "0000:17:00.0", "0x15b3", "0x101b", "0x020700", "mlx5_core")  # ConnectX-6, InfiniBand
    _pci(root, "0000:31:00.0", "0x15b3", "0x1021", "0x020000")  # ConnectX-7, Ethernet, no driver bound yet
    _pci(root, "0000:32:00.0", "0x15b3", "0xa2dc", "0x060400", "pcieport")  # BlueField bridge: not an adapter
    _pci(root, "0000:06:00.0", "0x10de", "0x2335", "0x030200", "nvidia")  # the GPU
    devices = gd.gather(root)["hca"]
    assert [device["address"] for device in devices] == ["0000:17:00.0", "0000:31:00.0"]
    assert devices[0]["driver"] == "mlx5_core" and devices[1]["driver"] is None
    driver_map = {"mlx5_core": ["mlx5_core", "mlx5_ib"], "mlx4_core": ["mlx4_core", "mlx4_ib"]}
    assert gd.hca_modules(devices, driver_map, ["mlx5_core", "mlx5_ib"]) == ["mlx5_core", "mlx5_ib"]
    assert gd.hca_modules(devices[:1], {}, []) == []


def test_real_h200_pci_bus_has_no_hca(tmp_path):
    root = str(tmp_path)
    for line in fixture("h200-firecracker-pci.txt").splitlines():
        address, vendor, device, pci_class, *driver = line.split()
        _pci(root, address, vendor, device, pci_class, driver[0] if driver else None)
    assert len(gd.RootTree(root).listdir("sys/bus/pci/devices")) == 7
    assert gd.pci_rdma_devices(gd.RootTree(root)) == []


def test_wanted_modules_and_runtime_load():
    assert gd.wanted_modules(["ib_core", "ib-uverbs"], ["mlx5_core"], ["ib_core", "rdma-rxe"]) == [
        "ib_core",
        "ib_uverbs",
        "mlx5_core",
        "rdma_rxe",
    ]
    possible = {"possible": False, "reason": "in a container"}
    assert gd.runtime_load(None, possible) == {"load": False, "why": "in a container"}
    assert gd.runtime_load("yes", possible) == {"load": True, "why": "rdma_modules_runtime_load=true"}
    assert gd.runtime_load(False, {"possible": True, "reason": "x"})["load"] is False
    message = gd.dry_run_error(["ib_core", "zz"], "6.1.0", "modprobe: FATAL: Module zz not found.\n")
    assert message.startswith("modprobe cannot load ib_core zz on kernel 6.1.0: modprobe: FATAL: Module zz not found.")
    assert "rdma_modules_runtime_load=false" in message


def test_probe_problems_name_the_host_and_the_mode_variable():
    from ansible_collections.gpucluster.fabric.plugins.module_utils.gpudirect import probe_problems

    assert probe_problems(["no NVIDIA driver"], ["modprobe cannot load zz"], "peermem", "gpu01") == [
        "gpu01: rdma_modules_gpudirect_mode=peermem: no NVIDIA driver",
        "gpu01: modprobe cannot load zz",
    ]
    assert probe_problems(["no NVIDIA driver"], [], "dmabuf") == [
        "rdma_modules_gpudirect_mode=dmabuf: no NVIDIA driver"
    ]
    assert probe_problems([], [], "auto", "gpu01") == []


def test_not_installed_leaves_versions_and_patterns_to_apt():
    from ansible_collections.gpucluster.fabric.plugins.module_utils import dpkg

    installed = gd.parse_dpkg_status(fixture("debian", "dpkg-status-bookworm-rdma-core.txt"))
    assert dpkg.not_installed(installed, ["rdma-core", "ibverbs-providers"]) == []
    assert dpkg.not_installed(installed, ["rdma-core", "perftest"]) == ["perftest"]
    # a version or a pattern is apt's to judge, even for an installed package
    assert dpkg.not_installed(installed, ["rdma-core=44.0-2", "rdma-*", {"name": "x"}]) == [
        "rdma-core=44.0-2",
        "rdma-*",
        {"name": "x"},
    ]
