"""Unit tests for plugins/module_utils/fabric_model.py: one rule per inventory value, the same for every caller."""

import pathlib
import re

import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils import fabric_model as fm
from ansible_collections.gpucluster.fabric.plugins.module_utils import fabric_mtu, gpudirect, nccl, opensm_partitions

# --- integers -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [(4096, 4096), ("4096", 4096), (" 4092 ", 4092), (0, 0)])
def test_parse_int_takes_ints_and_digit_strings(value, expected):
    assert fm.parse_int(value) == expected


@pytest.mark.parametrize("value", [True, False, "true", "0x1000", "-1", "4096.0", 4096.0, "", None, "4 096", [4096]])
def test_parse_int_refuses_booleans_and_other_strings(value):
    with pytest.raises(ValueError):
        fm.parse_int(value)


# --- booleans -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), (False, False), (1, True), (0, False)]
    + [(word, True) for word in ("true", "True", "TRUE", "yes", "Yes", "on", "ON", "1")]
    + [(word, False) for word in ("false", "False", "FALSE", "no", "No", "off", "OFF", "0")],
)
def test_parse_bool_takes_what_the_bool_filter_takes(value, expected):
    assert fm.parse_bool(value) is expected


@pytest.mark.parametrize("value", [None, "", "maybe", "t", "y", " true", 2, -1, 1.0, [True], {}])
def test_parse_bool_refuses_everything_else(value):
    with pytest.raises(ValueError, match="is not a boolean"):
        fm.parse_bool(value)


# --- versions -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2.21.5", (2, 21, 5)), ("6.1.0-18-amd64", (6, 1, 0)), ("39.0-1", (39, 0)), (" 5.12", (5, 12)), (34, (34,))],
)
def test_version_tuple(text, expected):
    assert fm.version_tuple(text) == expected


@pytest.mark.parametrize("text", [None, "", "unknown", "v2.21"])
def test_version_tuple_refuses_what_is_not_a_version(text):
    with pytest.raises(ValueError, match="does not start with a version number"):
        fm.version_tuple(text)


def test_version_callers_share_the_definition():
    assert nccl.version_tuple is gpudirect.version_tuple is fm.version_tuple
    # gpudirect reads versions off a host, where "absent" is a fact, not an error.
    assert gpudirect.known_version(None) is None and gpudirect.known_version("6.1.0") == (6, 1, 0)
    assert gpudirect.parse_nccl_version("garbage") is None
    with pytest.raises(ValueError):
        nccl.version_at_least("unknown", "2.13")


# --- P_Keys -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "full", "base", "is_full"),
    [
        ("0x8001", 0x8001, 0x0001, True),
        ("0x0001", 0x0001, 0x0001, False),
        ("0X8A01", 0x8A01, 0x0A01, True),
        (0x8101, 0x8101, 0x0101, True),
        (1, 0x0001, 0x0001, False),
        ("0xffff", 0xFFFF, 0x7FFF, True),
    ],
)
def test_pkey_full_value_base_and_membership(value, full, base, is_full):
    assert fm.parse_pkey(value) == full
    assert fm.pkey_base(value) == base
    assert fm.pkey_is_full(value) is is_full


def test_bare_hex_digits_are_refused_as_ambiguous():
    # '8001' would be 0x1f41 read as decimal and 0x8001 read as hex: refuse and say how to write it.
    with pytest.raises(ValueError, match="ambiguous .*write it as hex with 0x, e.g. 0x8001"):
        fm.parse_pkey("8001")


@pytest.mark.parametrize(
    ("value", "reason"), [(True, "boolean"), ("0x10000", "hex"), (0x10000, "16 bits"), (None, "not a number")]
)
def test_pkey_refused(value, reason):
    with pytest.raises(ValueError, match=reason):
        fm.parse_pkey(value)


def test_both_roles_read_a_pkey_the_same_way():
    part = {"name": "gpu", "pkey": "0x8101", "members": [{"host": "gpu1", "membership": "full"}]}
    hostvars = {"gpu1": {"fabric_port_guids": ["0x0002c903000a1b2e"]}}
    model, errors = opensm_partitions.resolve_partitions([part], hostvars, {"all": ["gpu1"]})
    assert errors == [] and model["partitions"][0]["pkey"] == 0x0101
    assert fabric_mtu.partition_for_interface({"name": "ib0.8101", "kind": "ipoib"}, [part]) is part
    assert fabric_mtu.partition_for_interface({"name": "ib0", "kind": "ipoib", "pkey": "0x0101"}, [part]) is part
    assert fabric_mtu.partition_for_interface({"name": "ib0", "kind": "ipoib"}, [part]) is None


@pytest.mark.parametrize(("name", "pkey"), [("ib0", None), ("ib0.8001", 0x8001), ("ib1.0002", 0x0002), (None, None)])
def test_interface_name_pkey(name, pkey):
    assert fm.interface_name_pkey(name) == pkey


@pytest.mark.parametrize(
    ("iface", "partition"),
    [
        ({"name": "ib0"}, 0x7FFF),
        ({"name": "ib0.8001"}, 0x0001),
        ({"name": "ib0", "pkey": "0x8a01"}, 0x0A01),
        ({"name": "storage0", "pkey": 0x8A01}, 0x0A01),
        ({"name": "ib0.8a01", "pkey": "0x8a01"}, 0x0A01),
    ],
)
def test_interface_partition_from_pkey_key_or_name(iface, partition):
    assert fm.interface_partition(iface) == partition


# --- IB MTUs ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("code", "size"), [(1, 256), (2, 512), (3, 1024), (4, 2048), (5, 4096)])
def test_ib_mtu_table_both_directions(code, size):
    assert fm.ib_mtu_code(size) == code
    assert fm.ib_mtu_bytes(code) == size
    assert fm.ib_mtu_code(str(size)) == code


@pytest.mark.parametrize("value", [5, 4092, 9000, True, "4k", None, 4096.0])
def test_ib_mtu_code_refuses_what_is_not_bytes(value):
    with pytest.raises(ValueError, match="IB MTU must be one of 256, 512, 1024, 2048, 4096 bytes"):
        fm.ib_mtu_code(value)


@pytest.mark.parametrize("value", [0, 6, 4096, True, None])
def test_ib_mtu_bytes_refuses_what_is_not_a_code(value):
    with pytest.raises(ValueError, match="code must be 1-5"):
        fm.ib_mtu_bytes(value)


@pytest.mark.parametrize(("value", "expected"), [(4096, 4096), ("2048", 2048), (None, 2048)])
def test_partition_mtu_bytes(value, expected):
    assert fm.partition_mtu_bytes(value) == expected


@pytest.mark.parametrize("value", [5, 4, 4000, True, ""])
def test_partition_mtu_is_bytes_only(value):
    # opensm_partitions[].mtu is bytes; the IBTA code (5) is what the role writes into partitions.conf.
    with pytest.raises(ValueError):
        fm.partition_mtu_bytes(value)


@pytest.mark.parametrize(("mode", "ib_mtu", "expected"), [("datagram", 4096, 4092), ("datagram", "2048", 2044)])
def test_ipoib_datagram_max_is_ib_mtu_minus_4(mode, ib_mtu, expected):
    assert fm.ipoib_max_mtu(mode, ib_mtu) == expected


def test_ipoib_connected_max_is_65520():
    assert fm.ipoib_max_mtu("connected") == 65520


def test_ipoib_max_rejects_unknown_values():
    with pytest.raises(ValueError):
        fm.ipoib_max_mtu("datagram", 3000)
    with pytest.raises(ValueError):
        fm.ipoib_max_mtu("unreliable")


@pytest.mark.parametrize(
    ("mode", "partition_mtu", "limit"),
    [("datagram", 4096, 4092), ("datagram", "4096", 4092), ("datagram", None, 2044), ("connected", 2048, None)],
)
def test_ipoib_partition_limit(mode, partition_mtu, limit):
    assert fm.ipoib_partition_limit(mode, partition_mtu) == limit


@pytest.mark.parametrize(
    ("netdev_mtu", "rdma_mtu"),
    [(9000, 4096), ("9000", 4096), (4200, 4096), (4192, 4096), (4191, 2048), (1500, 1024), (1119, 512), (351, None)],
)
def test_roce_active_mtu(netdev_mtu, rdma_mtu):
    assert fm.roce_active_mtu(netdev_mtu) == rdma_mtu


def test_roce_active_mtu_respects_the_ports_max_and_unknown_netdev():
    assert fm.roce_active_mtu(9000, max_mtu=1024) == 1024
    assert fm.roce_active_mtu(None) is None


def test_roce_active_mtu_matches_captured_softroce_devinfo():
    # tests/fixtures/softroce-qemu was captured with the netdev at MTU 4200.
    text = (pathlib.Path(__file__).parents[3] / "fixtures/softroce-qemu/ibv_devinfo_v_vm1.txt").read_text()
    active = int(re.search(r"active_mtu:\s+(\d+)", text).group(1))
    assert fm.roce_active_mtu(4200) == active == 4096


def test_roce_min_netdev_mtu():
    assert fm.roce_min_netdev_mtu(4096) == 4192
    assert fm.roce_active_mtu(fm.roce_min_netdev_mtu(2048)) == 2048


# --- interfaces ---------------------------------------------------------------------------------------------------


def test_normalise_fills_defaults():
    assert fm.normalise_interface({"name": "ib0", "kind": "ipoib"}) == {
        "name": "ib0",
        "kind": "ipoib",
        "mode": "datagram",
        "mtu": 4092,
        "address": None,
        "softroce": None,
        "pkey": None,
    }
    assert fm.normalise_interface({"name": "ib0", "kind": "ipoib", "mode": "connected"})["mtu"] == 65520
    assert fm.normalise_interface({"name": "ib0", "kind": "ipoib", "mode": None})["mode"] == "datagram"
    roce = fm.normalise_interface({"name": "ens1f0", "kind": "roce"})
    assert (roce["mtu"], roce["rdma_mtu"], roce["mode"], roce["pkey"]) == (9000, 4096, None, None)


def test_normalise_string_mtu_is_the_same_as_an_int():
    assert fm.normalise_interface({"name": "e0", "kind": "roce", "mtu": "4200"}) == fm.normalise_interface(
        {"name": "e0", "kind": "roce", "mtu": 4200}
    )
    assert fm.normalise_interface({"name": "ib0", "kind": "ipoib", "mtu": "4092"})["mtu"] == 4092


def test_normalise_leaves_bad_values_for_the_validator():
    assert fm.normalise_interface({"name": "ib0", "kind": "ipoib", "mtu": True})["mtu"] is True
    assert "rdma_mtu" not in fm.normalise_interface({"name": "e0", "kind": "roce", "mtu": True})
    assert fm.normalise_interface({"name": "ib0", "kind": "ipoib", "pkey": "8001"})["pkey"] == "8001"


def test_normalise_publishes_the_full_pkey_of_an_ipoib_entry():
    assert fm.normalise_interface({"name": "ib0.8101", "kind": "ipoib"})["pkey"] == 0x8101
    assert fm.normalise_interface({"name": "ib0", "kind": "ipoib", "pkey": "0x8a01"})["pkey"] == 0x8A01


def test_string_and_int_mtu_judged_alike_by_both_roles():
    # fabric_interfaces' preflight and opensm's cross-check gave "4092" and 4092 different verdicts before.
    partitions = [
        {
            "name": "gpu",
            "pkey": "0x0101",
            "ipoib": True,
            "mtu": 2048,
            "members": [{"host": "gpu1", "membership": "full"}],
        }
    ]
    hostvars = {"gpu1": {"fabric_port_guids": ["0x0002c903000a1b2e"]}}
    model, errors = opensm_partitions.resolve_partitions(partitions, hostvars, {"all": ["gpu1"]})
    assert errors == []
    for mtu in (4092, "4092"):
        iface = {"name": "ib0.8101", "kind": "ipoib", "mtu": mtu}
        assert len(fabric_mtu.interface_errors(iface, 0, "gpu1", partitions=partitions)) == 1
        hostvars["gpu1"]["fabric_interfaces"] = [iface]
        assert len(opensm_partitions.ipoib_mtu_errors(model, hostvars)) == 1
