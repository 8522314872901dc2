import os

import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils import fabric_link as f


def make_link(root, name, *, mtu=4092, type_=32, flags="0x1003", mode=None, driver=None, operstate="up"):
    base = root / "class" / "net" / name
    base.mkdir(parents=True)
    (base / "mtu").write_text(f"{mtu}\n")
    (base / "type").write_text(f"{type_}\n")
    (base / "flags").write_text(flags + "\n")
    (base / "operstate").write_text(operstate + "\n")
    if mode:
        (base / "mode").write_text(mode + "\n")
    if driver:
        drivers = root / "bus" / "pci" / "drivers" / driver
        drivers.mkdir(parents=True, exist_ok=True)
        (base / "device").mkdir()
        os.symlink(drivers, base / "device" / "driver")
    return base


def test_missing_link(tmp_path):
    assert f.read_link("ib0", str(tmp_path)) == {"name": "ib0", "exists": False}
    assert f.read_link("../etc", str(tmp_path))["exists"] is False


def test_connectx6_ipoib_is_enhanced(tmp_path):
    make_link(tmp_path, "ib0", mode="datagram", driver="mlx5_core")
    info = f.read_link("ib0", str(tmp_path))
    assert info == {
        "name": "ib0",
        "exists": True,
        "mtu": 4092,
        "operstate": "up",
        "admin_up": True,
        "type": 32,
        "infiniband": True,
        "mode": "datagram",
        "driver": "mlx5_core",
        "enhanced_ipoib": True,
    }


def test_enhanced_ipoib_turned_off_by_module_parameter(tmp_path):
    make_link(tmp_path, "ib0", mode="datagram", driver="mlx5_core")
    params = tmp_path / "module" / "ib_ipoib" / "parameters"
    params.mkdir(parents=True)
    (params / "ipoib_enhanced").write_text("0\n")
    assert f.read_link("ib0", str(tmp_path))["enhanced_ipoib"] is False


def test_connectx3_and_ethernet_are_not_enhanced_ipoib(tmp_path):
    make_link(tmp_path, "ib0", mode="connected", driver="mlx4_core", mtu=65520)
    make_link(tmp_path, "ens1f0", type_=1, driver="mlx5_core", mtu=9000, flags="0x1002", operstate="down")
    assert f.read_link("ib0", str(tmp_path))["enhanced_ipoib"] is False
    eth = f.read_link("ens1f0", str(tmp_path))
    assert (eth["enhanced_ipoib"], eth["mode"], eth["admin_up"], eth["infiniband"]) == (False, None, False, False)


def test_veth_stand_in_has_no_mode_and_no_driver(tmp_path):
    make_link(tmp_path, "ib0", type_=1)
    info = f.read_link("ib0", str(tmp_path))
    assert (info["mode"], info["driver"], info["enhanced_ipoib"]) == (None, None, False)


def test_parse_ip_addr():
    # `ip -o addr show dev ib0` from a bookworm container (iproute2 6.1)
    output = (
        "4: ib0    inet 10.10.0.11/16 scope global ib0\\       valid_lft forever preferred_lft forever\n"
        "4: ib0    inet6 fd00::11/64 scope global tentative \\       valid_lft forever preferred_lft forever\n"
        "4: ib0    inet6 fe80::6883:d1ff:feb3:f9f5/64 scope link tentative \\       "
        "valid_lft forever preferred_lft forever\n"
    )
    assert f.parse_ip_addr(output) == ["10.10.0.11/16", "fd00::11/64", "fe80::6883:d1ff:feb3:f9f5/64"]
    assert f.parse_ip_addr("") == []


def test_link_type_names():
    assert (f.link_type_name(1), f.link_type_name(32), f.link_type_name(772)) == ("Ethernet", "InfiniBand", "type 772")


def test_present_sysctls_in_a_container_namespace(tmp_path):
    conf = tmp_path / "proc" / "sys" / "net" / "ipv4" / "conf" / "all"
    conf.mkdir(parents=True)
    (conf / "rp_filter").write_text("2\n")
    (tmp_path / "proc" / "sys" / "net" / "ipv4" / "neigh" / "default").mkdir(parents=True)
    keys = ["net.ipv4.neigh.default.gc_thresh1", "net.ipv4.conf.all.rp_filter", "net.ipv4.conf.all"]
    # the neighbour defaults belong to the initial namespace; a directory is not a sysctl
    assert f.present_sysctls(keys, str(tmp_path)) == ["net.ipv4.conf.all.rp_filter"]
    assert f.present_sysctls([], str(tmp_path)) == []


def make_root(root, *files):
    for path in files:
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("")
    return str(root)


def never_asked(units):
    raise AssertionError("systemd was asked although netplan decides")


def running(*names):
    return lambda units: {unit: unit in names for unit in units}


def test_netplan_with_a_configuration_wins_without_asking_systemd(tmp_path):
    root = make_root(tmp_path, "usr/sbin/netplan", "etc/netplan/01-site.yaml", "sbin/ifup", "etc/network/interfaces")
    assert f.detect_backend(root, never_asked) == "netplan"
    assert f.detect_backend(make_root(tmp_path / "b", "usr/sbin/netplan", "etc/netplan/50-cloud.yml")) == "netplan"


@pytest.mark.parametrize(
    "files",
    [
        ("usr/sbin/netplan",),  # installed, /etc/netplan missing
        ("usr/sbin/netplan", "etc/netplan/README", "etc/netplan/.hidden.yaml"),  # nothing netplan reads
        ("etc/netplan/01-site.yaml",),  # a configuration, no netplan
    ],
)
def test_netplan_without_a_configuration_or_binary_falls_through(tmp_path, files):
    root = make_root(tmp_path, *files)
    assert f.detect_backend(root, running("NetworkManager.service")) == "NetworkManager"


def test_netplan_directory_entry_named_yaml_is_not_a_configuration(tmp_path):
    root = make_root(tmp_path, "usr/sbin/netplan", "etc/netplan/sub.yaml/x")
    assert f.netplan_configured(root) is False


IFUPDOWN = ("sbin/ifup", "etc/network/interfaces")


@pytest.mark.parametrize(
    ("active", "files", "expected"),
    [
        (
            ("NetworkManager.service", "systemd-networkd.service"),
            ("sbin/ifup", "etc/network/interfaces"),
            "NetworkManager",
        ),
        (("systemd-networkd.service",), ("sbin/ifup", "etc/network/interfaces"), "systemd-networkd"),
        ((), ("sbin/ifup", "etc/network/interfaces"), "ifupdown"),
        ((), ("sbin/ifup",), None),  # ifupdown needs both the tool and /etc/network/interfaces
        ((), (), None),
    ],
)
def test_precedence_after_netplan(tmp_path, active, files, expected):
    assert f.detect_backend(make_root(tmp_path, *files), running(*active)) == expected


def test_no_systemd_view_means_nothing_runs(tmp_path):
    assert f.detect_backend(make_root(tmp_path, "sbin/ifup", "etc/network/interfaces")) == "ifupdown"


UNITS = ["NetworkManager.service", "systemd-networkd.service"]


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("inactive\nactive\n", [False, True]),
        ("active\nreloading\n", [True, True]),
        ("failed\nactivating\n", [False, False]),
        # systemctl in a container without systemd: one line, or none, for two units
        ("offline\n", [False, False]),
        ("", [False, False]),
        (None, [False, False]),
    ],
)
def test_parse_is_active(output, expected):
    assert f.parse_is_active(UNITS, output) == dict(zip(UNITS, expected))
