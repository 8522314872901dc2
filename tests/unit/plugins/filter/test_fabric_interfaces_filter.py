import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpucluster.fabric.plugins.filter.fabric_interfaces import FilterModule
from ansible_collections.gpucluster.fabric.plugins.module_utils import fabric_model, fabric_mtu

FILTERS = FilterModule().filters()


# The rules behind the role's preflight filter, called as fabric_interfaces_preflight_errors calls them.
def test_errors_pass_host_partitions_and_threshold():
    interfaces = [{"name": "ib0", "kind": "ipoib"}, {"name": "ens1f0", "kind": "roce", "mtu": 1500}]
    partitions = [{"name": "Default", "pkey": "0x7fff", "ipoib": True, "mtu": 2048}]
    found = fabric_mtu.list_errors(interfaces, host="gpu01", partitions=partitions, roce_min_rdma_mtu=4096)
    assert len(found) == 2
    assert found[0].startswith("gpu01: fabric_interfaces[0] (ib0).mtu=4092 is above 2044")
    assert found[1].startswith("gpu01: fabric_interfaces[1] (ens1f0).mtu=1500 gives a RoCE RDMA MTU of 1024")
    assert fabric_mtu.list_errors(interfaces, host="gpu01", roce_min_rdma_mtu=None) == []


def test_normalise_and_arithmetic():
    assert fabric_model.normalise_interface({"name": "ib0", "kind": "ipoib"})["mtu"] == 4092
    assert fabric_model.roce_active_mtu(9000) == 4096
    assert fabric_model.ipoib_max_mtu("datagram", 2048) == 2044
    assert fabric_mtu.neigh_gc_thresholds(512, 4)["gc_thresh3"] == 8192
    with pytest.raises(ValueError):
        fabric_model.ipoib_max_mtu("bogus")


def test_errors_use_detected_links_and_overrides():
    interfaces = [{"name": "ib0", "kind": "ipoib", "mode": "connected"}, {"name": "ib1", "kind": "ipoib"}]
    links = {"ib0": {"exists": True, "enhanced_ipoib": True}, "ib1": {"exists": False}}
    found = fabric_mtu.list_errors(interfaces, host="gpu01", links=links)
    assert len(found) == 2
    assert "(ib0).mode=connected is refused" in found[0]
    assert found[1].startswith("gpu01: fabric_interfaces[1] (ib1) does not exist on this host")
    # the inventory may say a detected mlx5 port has enhanced IPoIB turned off
    assert len(fabric_mtu.list_errors(interfaces, host="gpu01", links=links, enhanced_ipoib={"ib0": False})) == 1


def test_default_partition_reaches_the_checks():
    found = fabric_mtu.list_errors(
        [{"name": "ib0", "kind": "ipoib"}],
        host="gpu1",
        roce_min_rdma_mtu=4096,
        default_partition={"ipoib": True, "mtu": 2048},
    )
    assert len(found) == 1 and "on opensm_default_partition" in found[0]


def checks(**changes):
    """The checks mapping as vars/main.yml builds it (__fabric_interfaces_checks) for a well-configured host."""
    base = {
        "host": "gpu01",
        "links": {"eth1": {"exists": True, "type": 1}},
        "check_link_type": True,
        "enhanced_ipoib": {},
        "partitions": None,
        "default_partition": None,
        "roce_min_rdma_mtu": "4096",
        "host_checks": {
            "os_family": "Debian",
            "distribution": "Debian",
            "supported_families": ["Debian"],
            "peer_group": "all",
            "inventory_groups": ["all", "ungrouped", "gpu_nodes"],
            "backend": "ifupdown",
        },
    }
    base.update(changes)
    return base


def test_preflight_errors_one_call_every_check():
    lab = [{"name": "eth1", "kind": "roce", "mtu": 4200, "address": "192.168.88.11/24"}]
    assert FILTERS["fabric_interfaces_preflight_errors"](lab, checks()) == []
    host_checks = dict(checks()["host_checks"], os_family="RedHat", peer_group="gpus", backend="")
    bad = [{"name": "eth1", "kind": "ipoib"}, {"name": "eth2", "kind": "roce", "mtu": 1500}]
    found = FILTERS["fabric_interfaces_preflight_errors"](
        bad, checks(host_checks=host_checks, links={"eth1": {"exists": True, "type": 1}, "eth2": {"exists": False}})
    )
    assert len(found) == 6, found
    assert all(message.startswith("gpu01: ") for message in found)
    assert "kind=ipoib does not match the link" in found[3]
    assert "(eth2).mtu=1500 gives a RoCE RDMA MTU of 1024" in found[4]
    assert "(eth2) does not exist on this host" in found[5]
    # roce_min_rdma_mtu 0 turns the RDMA MTU check off, as in fabric_mtu.list_errors
    found = FILTERS["fabric_interfaces_preflight_errors"](bad[1:], checks(roce_min_rdma_mtu=0, links={}))
    assert found == []


def test_preflight_errors_refuses_an_unknown_check():
    with pytest.raises(AnsibleFilterError, match="fabric_interfaces_preflight_errors"):
        FILTERS["fabric_interfaces_preflight_errors"]([{"name": "eth1", "kind": "roce"}], checks(bogus=1))


def test_sysctls_filter():
    got = FILTERS["fabric_interfaces_sysctls"]([{"name": "eth1"}], 2, "auto", {"net.ipv4.conf.all.rp_filter": 2}, True)
    assert list(got) == [f"net.{f}.neigh.default.gc_thresh{i}" for f in ("ipv4", "ipv6") for i in (1, 2, 3)]
    with pytest.raises(AnsibleFilterError):
        FILTERS["fabric_interfaces_sysctls"]([{"name": "eth1"}], "many")
