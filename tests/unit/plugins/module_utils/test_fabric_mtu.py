import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils import fabric_mtu as m


def errors(iface, **kwargs):
    return m.interface_errors(iface, 0, "node1", **kwargs)


def test_valid_entries_have_no_errors():
    assert errors({"name": "ib0", "kind": "ipoib", "address": "10.10.0.11/16"}) == []
    assert errors({"name": "ib0", "kind": "ipoib", "mode": "connected", "mtu": 65520}) == []
    assert errors({"name": "ens1f0", "kind": "roce", "mtu": 4200, "softroce": "rxe0"}) == []
    assert errors({"name": "ens1f0", "kind": "roce", "address": "fd00::11/64"}) == []


def test_mtu_9000_on_datagram_ipoib_names_host_interface_value_and_fix():
    (message,) = errors({"name": "ib0", "kind": "ipoib", "mtu": 9000})
    assert message.startswith("node1: fabric_interfaces[0] (ib0).mtu=9000 is above 4092 for datagram IPoIB")
    assert "use 4092" in message and "mode connected" in message


def test_connected_mode_refused_on_enhanced_ipoib():
    (message,) = errors({"name": "ib0", "kind": "ipoib", "mode": "connected"}, enhanced_ipoib=True)
    assert "node1: fabric_interfaces[0] (ib0).mode=connected is refused" in message
    assert "ConnectX-4" in message and "use mode datagram" in message
    assert errors({"name": "ib0", "kind": "ipoib", "mode": "connected"}, enhanced_ipoib=False) == []


def test_datagram_fix_does_not_suggest_connected_on_enhanced_ipoib():
    (message,) = errors({"name": "ib0", "kind": "ipoib", "mtu": 9000}, enhanced_ipoib=True)
    assert "connected" not in message


def test_connected_mode_above_65520():
    (message,) = errors({"name": "ib0", "kind": "ipoib", "mode": "connected", "mtu": 65535})
    assert "is above 65520 for connected IPoIB" in message


@pytest.mark.parametrize("mtu", [9000, "abc", True, 20])
def test_bad_ipoib_mtus(mtu):
    assert len(errors({"name": "ib0", "kind": "ipoib", "mtu": mtu})) == 1


@pytest.mark.parametrize("mtu", [True, "abc", "4092.0", "0x0ffc"])
def test_mtu_that_is_not_a_whole_number(mtu):
    (message,) = errors({"name": "ib0", "kind": "ipoib", "mtu": mtu})
    assert message == f"node1: fabric_interfaces[0] (ib0).mtu={mtu} is not a whole number; use an integer such as 4092"
    (message,) = errors({"name": "e0", "kind": "roce", "mtu": mtu})
    assert "is not a whole number" in message


def test_string_mtu_is_judged_like_the_int():
    assert errors({"name": "ib0", "kind": "ipoib", "mtu": "4092"}) == []
    assert errors({"name": "ib0", "kind": "ipoib", "mtu": "9000"}) == errors(
        {"name": "ib0", "kind": "ipoib", "mtu": 9000}
    )
    assert errors({"name": "e0", "kind": "roce", "mtu": "9000"}) == []


# --- pkey: the partition of an IPoIB interface, as roles/opensm/README.md documents it ---------------------------


@pytest.mark.parametrize(
    "iface",
    [
        {"name": "ib0", "kind": "ipoib", "pkey": "0x8a01"},
        {"name": "ib0", "kind": "ipoib", "pkey": 0x8A01},
        {"name": "ib0.8101", "kind": "ipoib", "pkey": "0x8101"},
        # the kernel sets the full-membership bit on every child: 0x0101 and 0x8101 are one partition
        {"name": "ib0.8101", "kind": "ipoib", "pkey": "0x0101"},
    ],
)
def test_pkey_key_accepted_on_ipoib(iface):
    assert errors(iface) == []


def test_pkey_disagreeing_with_the_name_suffix():
    (message,) = errors({"name": "ib0.8101", "kind": "ipoib", "pkey": "0x8102"})
    assert message == (
        "node1: fabric_interfaces[0] (ib0.8101).pkey=0x8102 names partition 0x0102 but the interface name ib0.8101"
        " carries P_Key 0x8101 (partition 0x0101); make them agree, or drop pkey: the kernel names an IPoIB child"
        " after its P_Key"
    )


@pytest.mark.parametrize(("pkey", "problem"), [("8101", "ambiguous"), (True, "boolean"), ("0x8000", "0x0000")])
def test_bad_pkey_key(pkey, problem):
    (message,) = errors({"name": "ib0", "kind": "ipoib", "pkey": pkey})
    assert message.startswith(f"node1: fabric_interfaces[0] (ib0).pkey={pkey} ")
    assert problem in message


def test_pkey_key_refused_on_roce():
    (message,) = errors({"name": "ens1f0", "kind": "roce", "pkey": "0x8101"})
    assert message.startswith(
        "node1: fabric_interfaces[0] (ens1f0).pkey=0x8101 is set on a RoCE interface; remove pkey"
    )


def test_pkey_key_selects_the_partition_for_the_mtu_check():
    (message,) = errors({"name": "ib0", "kind": "ipoib", "pkey": "0x8002"}, partitions=PARTITIONS)
    assert "(ib0).mtu=4092 is above 2044, what partition storage" in message


def test_roce_mtu_that_lowers_rdma_mtu_is_flagged():
    (message,) = errors({"name": "ens1f0", "kind": "roce", "mtu": 4096})
    assert "(ens1f0).mtu=4096 gives a RoCE RDMA MTU of 2048, below 4096" in message
    assert "use mtu >= 4192" in message
    assert errors({"name": "ens1f0", "kind": "roce", "mtu": 1500}, roce_min_rdma_mtu=1024) == []
    assert errors({"name": "ens1f0", "kind": "roce", "mtu": 1500}, roce_min_rdma_mtu=None) == []


def test_roce_mtu_range_and_mode():
    assert "outside" in errors({"name": "ens1f0", "kind": "roce", "mtu": 16000})[0]
    assert "is set on a RoCE interface" in errors({"name": "ens1f0", "kind": "roce", "mode": "datagram"})[0]


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("10.10.0.300/16", "is not a valid address"),
        ("10.10.0.11", "has no prefix length"),
        ("10.10.0.0/16", "network or broadcast"),
        ("10.10.255.255/16", "network or broadcast"),
        ("fd00::1/129", "is not a valid address"),
    ],
)
def test_invalid_address(address, problem):
    (message,) = errors({"name": "ib0", "kind": "ipoib", "address": address})
    assert message.startswith(f"node1: fabric_interfaces[0] (ib0).address={address} ")
    assert problem in message and "CIDR" in message or "host address" in message


def test_bad_kind_name_softroce_and_unknown_keys():
    assert "use ipoib or roce" in errors({"name": "ib0", "kind": "ethernet"})[0]
    assert "Linux interface name" in errors({"name": "a/b", "kind": "roce"})[0]
    assert "Linux interface name" in errors({"name": "x" * 16, "kind": "roce"})[0]
    assert "kind roce only" in errors({"name": "ib0", "kind": "ipoib", "softroce": "rxe0"})[0]
    assert "RDMA device name" in errors({"name": "e0", "kind": "roce", "softroce": "rxe 0"})[0]
    assert "is not a known key" in errors({"name": "ib0", "kind": "ipoib", "vlan": 1})[0]
    assert "is not a mapping" in m.interface_errors("ib0", 2, "node1")[0]


PARTITIONS = [
    {"name": "Default", "pkey": "0x7fff", "ipoib": True, "mtu": 4096},
    {"name": "storage", "pkey": "0x0002", "ipoib": True},
    {"name": "compute", "pkey": 1, "ipoib": False, "mtu": 4096},
]


def test_ipoib_mtu_checked_against_partition_mtu():
    assert errors({"name": "ib0", "kind": "ipoib"}, partitions=PARTITIONS) == []
    # storage has no mtu: OpenSM's default mtu=4 (2048) caps datagram IPoIB at 2044.
    (message,) = errors({"name": "ib0.8002", "kind": "ipoib"}, partitions=PARTITIONS)
    assert "(ib0.8002).mtu=4092 is above 2044, what partition storage" in message
    assert "use mtu 2044, or set mtu: 4096 on opensm_partitions entry storage" in message
    assert errors({"name": "ib0.8002", "kind": "ipoib", "mtu": 2044}, partitions=PARTITIONS) == []
    # connected mode uses RC, not the broadcast group
    assert errors({"name": "ib0.8002", "kind": "ipoib", "mode": "connected"}, partitions=PARTITIONS) == []


def test_ipoib_on_partition_without_ipoib_flag():
    (message,) = errors({"name": "ib0.8001", "kind": "ipoib"}, partitions=PARTITIONS)
    assert "which has ipoib off (no ipoib: true)" in message and "set ipoib: true" in message
    # a partition that leaves ipoib out has no broadcast group either (OpenSM writes none without the flag)
    (message,) = errors({"name": "ib0.8003", "kind": "ipoib"}, partitions=[{"name": "x", "pkey": "0x0003"}])
    assert "partition x, which has ipoib off" in message


def test_no_partition_check_without_matching_partition():
    assert errors({"name": "ib0.8005", "kind": "ipoib"}, partitions=PARTITIONS) == []
    assert errors({"name": "ib0", "kind": "ipoib"}, partitions=[{"name": "x", "pkey": "0x0003", "mtu": 2048}]) == []
    default_2k = [{"name": "Default", "ipoib": True, "mtu": 2048}]
    assert errors({"name": "ib0", "kind": "ipoib"}, partitions=default_2k)[0].count("2044")


def test_default_partition_checked_from_opensm_default_partition():
    # Without a Default entry in opensm_partitions, the Default line comes from opensm_default_partition.
    ib0 = {"name": "ib0", "kind": "ipoib"}
    storage = [{"name": "storage", "pkey": "0x0002", "ipoib": True, "mtu": 4096}]
    assert errors(ib0, partitions=storage) == []
    (message,) = errors(ib0, partitions=storage, default_partition={"membership": "full", "ipoib": True})
    assert "(ib0).mtu=4092 is above 2044, what partition Default (mtu unset (OpenSM default 2048))" in message
    assert message.endswith("use mtu 2044, or set mtu: 4096 on opensm_default_partition")
    assert errors(ib0, default_partition={"ipoib": True, "mtu": 4096}) == []
    (message,) = errors(ib0, default_partition={"membership": "full", "mtu": 4096})
    assert "ipoib off" in message and message.endswith("set ipoib: true on opensm_default_partition")
    # a Default entry in opensm_partitions wins; a child interface is not on the Default partition
    assert errors(ib0, partitions=PARTITIONS, default_partition={"ipoib": False}) == []
    assert errors({"name": "ib0.8005", "kind": "ipoib"}, default_partition={"ipoib": False}) == []


def test_list_errors_duplicates_and_enhanced_map():
    interfaces = [
        {"name": "ib0", "kind": "ipoib", "address": "10.10.0.11/16", "mode": "connected"},
        {"name": "ib0", "kind": "ipoib", "address": "10.10.0.11/24"},
        {"name": "ens1f0", "kind": "roce", "softroce": "rxe0"},
        {"name": "ens1f1", "kind": "roce", "softroce": "rxe0"},
    ]
    found = m.list_errors(interfaces, "node1", enhanced_ipoib={"ib0": True})
    assert any("fabric_interfaces[0] (ib0).mode=connected is refused" in e for e in found)
    assert (
        "node1: fabric_interfaces[1].name=ib0 repeats fabric_interfaces[0]; give each interface its own name" in found
    )
    assert any("[1].address=10.10.0.11/24 repeats" in e for e in found)
    assert any("[3].softroce=rxe0 repeats fabric_interfaces[2]" in e for e in found)
    assert len(found) == 4
    assert m.list_errors(None) == []
    assert "is not a list" in m.list_errors({"name": "ib0"}, "node1")[0]


@pytest.mark.parametrize(("override", "refused"), [(True, True), ("true", True), ("false", False), ("no", False)])
def test_enhanced_ipoib_override_read_as_a_boolean(override, refused):
    # bool("false") is True: a string "false" from -e or an AWX survey used to refuse connected mode.
    iface = {"name": "ib0", "kind": "ipoib", "mode": "connected"}
    found = m.list_errors([iface], "node1", enhanced_ipoib={"ib0": override})
    assert bool(found) is refused
    # and it wins over what fabric_link_info detected, both ways
    links = {"ib0": {"exists": True, "enhanced_ipoib": not refused}}
    assert bool(m.list_errors([iface], "node1", links=links, enhanced_ipoib={"ib0": override})) is refused


def test_enhanced_ipoib_override_that_is_not_a_boolean():
    found = m.list_errors([{"name": "ib0", "kind": "ipoib"}], "node1", enhanced_ipoib={"ib0": "maybe"})
    assert found == ["node1: fabric_interfaces_enhanced_ipoib.ib0=maybe: 'maybe' is not a boolean; write true or false"]


def test_partition_ipoib_string_false_is_off():
    partitions = [{"name": "storage", "pkey": "0x0002", "ipoib": "false", "mtu": 4096}]
    (message,) = errors({"name": "ib0.8002", "kind": "ipoib"}, partitions=partitions)
    assert "ipoib off" in message
    assert errors({"name": "ib0.8002", "kind": "ipoib"}, partitions=[dict(partitions[0], ipoib="true")]) == []


@pytest.mark.parametrize(
    ("peers", "rails", "expected"),
    [
        (4, 1, (128, 512, 1024)),
        (256, 8, (2048, 4096, 8192)),
        (1000, 4, (4000, 8000, 16000)),
    ],
)
def test_neigh_gc_thresholds(peers, rails, expected):
    got = m.neigh_gc_thresholds(peers, rails)
    assert (got["gc_thresh1"], got["gc_thresh2"], got["gc_thresh3"]) == expected
    assert got["gc_thresh1"] < got["gc_thresh2"] < got["gc_thresh3"]
    assert got["gc_thresh3"] > peers * rails


ETHERNET = {"exists": True, "type": 1, "infiniband": False}
INFINIBAND = {"exists": True, "type": 32, "infiniband": True}


def test_ipoib_on_an_ethernet_link_names_interface_and_fix():
    found = m.list_errors([{"name": "ens1f0", "kind": "ipoib"}], "node1", links={"ens1f0": ETHERNET})
    assert found == [
        "node1: fabric_interfaces[0] (ens1f0).kind=ipoib does not match the link: the kernel reports ens1f0 as"
        " Ethernet, kind ipoib needs an InfiniBand link; write kind: roce for an Ethernet port, or name the port's"
        " IPoIB netdev (ip -br link: link/infiniband)"
    ]


def test_roce_on_an_infiniband_link_and_other_link_types():
    (message,) = m.list_errors([{"name": "ib0", "kind": "roce"}], "node1", links={"ib0": INFINIBAND})
    assert "(ib0).kind=roce does not match the link: the kernel reports ib0 as InfiniBand" in message
    assert "write kind: ipoib for an InfiniBand port" in message
    loopback = {"exists": True, "type": 772}
    (message,) = m.list_errors([{"name": "lo", "kind": "roce"}], "node1", links={"lo": loopback})
    assert "reports lo as type 772, kind roce needs an Ethernet link" in message


def test_matching_or_unknown_link_types_pass_and_the_check_can_be_turned_off():
    interfaces = [{"name": "ib0", "kind": "ipoib"}, {"name": "ens1f0", "kind": "roce"}]
    assert m.list_errors(interfaces, "node1", links={"ib0": INFINIBAND, "ens1f0": ETHERNET}) == []
    assert m.list_errors(interfaces, "node1", links={"ib0": {"exists": True}, "ens1f0": {"exists": True}}) == []
    # veths named ib0 stand in for IPoIB in the container lab
    swapped = {"ib0": ETHERNET, "ens1f0": INFINIBAND}
    assert len(m.list_errors(interfaces, "node1", links=swapped)) == 2
    assert m.list_errors(interfaces, "node1", links=swapped, check_link_type=False) == []
    # a missing link gets its own message, not a link-type one
    (message,) = m.list_errors(interfaces[:1], "node1", links={"ib0": {"exists": False}})
    assert "does not exist on this host" in message


HOST_OK = {
    "os_family": "Debian",
    "distribution": "Debian",
    "supported_families": ["Debian"],
    "peer_group": "gpu_nodes",
    "inventory_groups": ["all", "ungrouped", "gpu_nodes"],
    "backend": "ifupdown",
}


def test_host_errors_none_when_all_is_well():
    assert m.host_errors("node1", interfaces=[{"name": "eth1"}], **HOST_OK) == []


def test_host_errors_all_at_once():
    bad = dict(HOST_OK)
    bad.update(os_family="RedHat", distribution="Rocky", peer_group="gpu", backend="")
    found = m.host_errors("node1", interfaces=[{"name": "eth1"}], **bad)
    assert len(found) == 3
    assert found[0].startswith(
        "node1: fabric_interfaces supports Debian and Ubuntu hosts; this host is Rocky (RedHat)."
    )
    assert found[1].startswith("node1: fabric_interfaces_peer_group=gpu is not an inventory group; name the group")
    assert found[2].startswith("node1: fabric_interfaces_backend=auto found no netplan, NetworkManager,")
    assert "set fabric_interfaces_backend: none to apply at run time only" in found[2]


def test_host_errors_peer_group_unchecked_and_no_backend_needed_without_interfaces():
    bad = dict(HOST_OK)
    bad.update(peer_group=None, backend=None)
    assert m.host_errors("node1", interfaces=[], **bad) == []
    assert m.host_errors("node1", interfaces="ib0", **bad) == []  # list_errors reports the type


def test_role_errors_joins_host_and_interface_errors():
    found = m.role_errors(
        [{"name": "eth1", "kind": "ipoib", "mtu": 9000}],
        "node1",
        links={"eth1": ETHERNET},
        host_checks=dict(HOST_OK, backend=""),
    )
    assert [message.split(" ")[1] for message in found] == [
        "fabric_interfaces_backend=auto",
        "fabric_interfaces[0]",
        "fabric_interfaces[0]",
    ]
    assert "mtu=9000 is above 4092" in found[1] and "kind=ipoib does not match" in found[2]
    assert (
        m.role_errors(
            [{"name": "eth1", "kind": "ipoib"}],
            "node1",
            links={"eth1": ETHERNET},
            check_link_type=False,
            host_checks=HOST_OK,
        )
        == []
    )


MULTIRAIL = {"net.ipv4.conf.all.arp_ignore": 2, "net.ipv4.conf.all.rp_filter": 2}


def neigh(family, thresholds):
    return {f"net.{family}.neigh.default.gc_thresh{i}": value for i, value in enumerate(thresholds, 1)}


@pytest.mark.parametrize(
    ("rails", "peers", "multirail", "neigh_tuning", "expected"),
    [
        # one rail: no multi-rail sysctls on auto, neighbour tables at least the kernel defaults
        (1, 2, "auto", True, {**neigh("ipv4", (128, 512, 1024)), **neigh("ipv6", (128, 512, 1024))}),
        (2, 256, "auto", True, {**MULTIRAIL, **neigh("ipv4", (512, 1024, 2048)), **neigh("ipv6", (512, 1024, 2048))}),
        (2, 256, "disabled", False, {}),
        (1, 2, "enabled", False, MULTIRAIL),
        (0, 2, "auto", True, {}),  # no rail, no neighbour tuning
        (0, 2, "enabled", True, MULTIRAIL),
    ],
)
def test_fabric_sysctls(rails, peers, multirail, neigh_tuning, expected):
    interfaces = [{"name": f"ib{i}", "kind": "ipoib"} for i in range(rails)]
    got = m.fabric_sysctls(interfaces, peers, multirail, MULTIRAIL, neigh_tuning)
    assert got == expected
    assert list(got) == list(expected)  # multi-rail first, then IPv4, then IPv6: the order they are written in


def test_fabric_sysctls_on_bad_input_counts_no_rail():
    assert m.fabric_sysctls("ib0", 2, "auto", MULTIRAIL, True) == {}
    assert m.fabric_sysctls(None, 2, "enabled", "not a dict", True) == {}
