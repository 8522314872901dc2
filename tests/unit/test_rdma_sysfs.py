import sys
from pathlib import Path

import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils.rdma_sysfs import (
    expand_gid,
    loaded_modules,
    merge_ibv_devinfo,
    parse_ibv_devinfo,
    parse_rate,
    read_interface_mtus,
    read_rdma_devices,
    roce_active_mtu,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

sys.path.insert(0, str(FIXTURES))
import build_fake_sysfs  # noqa: E402


@pytest.fixture
def vm1_root(tmp_path, fixture_text):
    build_fake_sysfs.build(fixture_text("softroce-qemu/ibv_devinfo_v_vm1.txt"), str(tmp_path), "eth1", 4200)
    return str(tmp_path)


def test_parse_ibv_devinfo(fixture_text):
    devices = parse_ibv_devinfo(fixture_text("softroce-qemu/ibv_devinfo_v_vm1.txt"))
    assert len(devices) == 1
    device = devices[0]
    assert device["hca_id"] == "rxe0"
    assert device["node_guid"] == "5054:00ff:feab:0001"
    port = device["ports"][0]
    assert port["port"] == 1
    assert port["state"] == "PORT_ACTIVE (4)"
    assert port["active_mtu"] == 4096
    assert port["max_mtu"] == 4096
    assert port["link_layer"] == "Ethernet"
    assert port["gids"] == [
        {"index": 0, "gid": "fe80::5054:ff:feab:1", "type": "RoCE v2"},
        {"index": 1, "gid": "::ffff:10.20.0.1", "type": "RoCE v2"},
    ]


def test_read_fake_sysfs(vm1_root):
    devices = read_rdma_devices(vm1_root)
    assert [d["name"] for d in devices] == ["rxe0"]
    port = devices[0]["ports"][0]
    assert port["state"] == "ACTIVE"
    assert port["state_code"] == 4
    assert port["phys_state"] == "LinkUp"
    assert port["rate"] == "2.5 Gb/sec (1X SDR)"
    assert port["rate_gbps"] == 2.5
    assert port["link_layer"] == "Ethernet"
    assert port["lid"] == 0
    assert port["netdev"] == "eth1"
    assert port["netdev_mtu"] == 4200
    # Unused (all-zero) GID slots are skipped.
    assert port["gids"] == [
        {"index": 0, "gid": "fe80:0000:0000:0000:5054:00ff:feab:0001", "type": "RoCE v2", "ndev": "eth1"},
        {"index": 1, "gid": "0000:0000:0000:0000:0000:ffff:0a14:0001", "type": "RoCE v2", "ndev": "eth1"},
    ]


def test_roce_mtu_from_netdev_agrees_with_ibv_devinfo(vm1_root, fixture_text):
    """The lab ran rxe at netdev MTU 4200 and ibv_devinfo said active_mtu 4096: the derivation must agree."""
    port = read_rdma_devices(vm1_root)[0]["ports"][0]
    devinfo_port = parse_ibv_devinfo(fixture_text("softroce-qemu/ibv_devinfo_v_vm1.txt"))[0]["ports"][0]
    assert port["active_mtu"] == devinfo_port["active_mtu"] == 4096
    assert port["active_mtu_source"] == "netdev_mtu"


def test_merge_ibv_devinfo_takes_precedence(vm1_root, fixture_text):
    devices = read_rdma_devices(vm1_root)
    merge_ibv_devinfo(devices, parse_ibv_devinfo(fixture_text("softroce-qemu/ibv_devinfo_v_vm1.txt")))
    assert devices[0]["ports"][0]["active_mtu_source"] == "ibv_devinfo"


def test_committed_trees_match_builder(tmp_path, fixture_text):
    """tests/fixtures/sysfs-softroce-vm{1,2} (used by Molecule) are what the builder produces."""
    for vm in ("vm1", "vm2"):
        out = tmp_path / vm
        build_fake_sysfs.build(fixture_text(f"softroce-qemu/ibv_devinfo_v_{vm}.txt"), str(out), "eth1", 4200)
        assert read_rdma_devices(str(out)) == read_rdma_devices(str(FIXTURES / f"sysfs-softroce-{vm}"))


def test_no_rdma_device(tmp_path):
    assert read_rdma_devices(str(tmp_path)) == []


def test_loaded_modules(vm1_root):
    assert loaded_modules(["ib_core", "nvidia_peermem"], vm1_root) == {"ib_core": True, "nvidia_peermem": False}


@pytest.mark.parametrize(
    ("netdev_mtu", "active"), [(1500, 1024), (4200, 4096), (9000, 4096), (4191, 2048), (4192, 4096), (300, None)]
)
def test_roce_active_mtu(netdev_mtu, active):
    assert roce_active_mtu(netdev_mtu) == active


def test_parse_rate():
    assert parse_rate("400 Gb/sec (4X NDR)") == {"gbps": 400.0, "width": 4, "speed": "NDR"}
    assert parse_rate("2.5 Gb/sec (1X SDR)")["gbps"] == 2.5
    assert parse_rate("garbage")["gbps"] is None


def test_expand_gid():
    assert expand_gid("::ffff:10.20.0.1") == "0000:0000:0000:0000:0000:ffff:0a14:0001"


def test_read_interface_mtus(vm1_root):
    interfaces = [{"name": "eth1", "expected_mtu": 4200}, {"name": "ib9", "expected_mtu": 4092}]
    assert read_interface_mtus(interfaces, str(vm1_root)) == [
        {"name": "eth1", "expected_mtu": 4200, "mtu": 4200},
        {"name": "ib9", "expected_mtu": 4092, "mtu": None},
    ]
    assert read_interface_mtus([], str(vm1_root)) == []
