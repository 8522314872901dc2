import os

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
