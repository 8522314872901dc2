import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpucluster.fabric.plugins.filter.fabric_interfaces import FilterModule

FILTERS = FilterModule().filters()


def test_errors_filter_passes_host_partitions_and_threshold():
    interfaces = [{"name": "ib0", "kind": "ipoib"}, {"name": "ens1f0", "kind": "roce", "mtu": 1500}]
    partitions = [{"name": "Default", "pkey": "0x7fff", "ipoib": True, "mtu": 2048}]
    found = FILTERS["fabric_interfaces_errors"](interfaces, "gpu01", {}, {}, partitions, 4096)
    assert len(found) == 2
    assert found[0].startswith("gpu01: fabric_interfaces[0] (ib0).mtu=4092 is above 2044")
    assert found[1].startswith("gpu01: fabric_interfaces[1] (ens1f0).mtu=1500 gives a RoCE RDMA MTU of 1024")
    assert FILTERS["fabric_interfaces_errors"](interfaces, "gpu01", {}, {}, None, 0) == []


def test_normalise_and_arithmetic_filters():
    assert FILTERS["fabric_interfaces_normalise"]([{"name": "ib0", "kind": "ipoib"}])[0]["mtu"] == 4092
    assert FILTERS["fabric_interfaces_normalise"](None) == []
    assert FILTERS["roce_active_mtu"](9000) == 4096
    assert FILTERS["ipoib_max_mtu"]("datagram", 2048) == 2044
    assert FILTERS["neigh_gc_thresholds"](512, 4)["gc_thresh3"] == 8192
    with pytest.raises(AnsibleFilterError):
        FILTERS["ipoib_max_mtu"]("bogus")


def test_errors_filter_uses_detected_links_and_overrides():
    interfaces = [{"name": "ib0", "kind": "ipoib", "mode": "connected"}, {"name": "ib1", "kind": "ipoib"}]
    links = {"ib0": {"exists": True, "enhanced_ipoib": True}, "ib1": {"exists": False}}
    found = FILTERS["fabric_interfaces_errors"](interfaces, "gpu01", links)
    assert len(found) == 2
    assert "(ib0).mode=connected is refused" in found[0]
    assert found[1].startswith("gpu01: fabric_interfaces[1] (ib1) does not exist on this host")
    # the inventory may say a detected mlx5 port has enhanced IPoIB turned off
    assert len(FILTERS["fabric_interfaces_errors"](interfaces, "gpu01", links, {"ib0": False})) == 1


def test_default_partition_reaches_the_filter():
    from ansible_collections.gpucluster.fabric.plugins.filter.fabric_interfaces import fabric_interfaces_errors

    found = fabric_interfaces_errors(
        [{"name": "ib0", "kind": "ipoib"}], "gpu1", {}, {}, None, 4096, {"ipoib": True, "mtu": 2048}
    )
    assert len(found) == 1 and "on opensm_default_partition" in found[0]
