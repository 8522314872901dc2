"""Unit tests for the filter plugins port_guid and opensm (thin wrappers over module_utils)."""

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpucluster.fabric.plugins.filter.opensm import FilterModule as OpensmFilters
from ansible_collections.gpucluster.fabric.plugins.filter.port_guid import FilterModule as GuidFilters
from ansible_collections.gpucluster.fabric.plugins.module_utils import opensm_partitions as op
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_model import ib_mtu_code

F = dict(GuidFilters().filters(), **OpensmFilters().filters())

HOSTVARS = {
    "sm1": {"fabric_port_guids": ["0x0002c903000a1b2c"]},
    "gpu1": {
        "fabric_port_guids": ["0002:c903:000a:1b2e"],
        "fabric_interfaces": [{"name": "ib0", "kind": "ipoib", "mode": "datagram", "mtu": 4092}],
    },
}
GROUPS = {"all": ["sm1", "gpu1"], "gpu_nodes": ["gpu1"], "subnet_managers": ["sm1"]}
PARTS = [{"name": "gpu", "pkey": "0x0101", "members": [{"group": "gpu_nodes", "membership": "both"}]}]


def test_port_guid_single_and_list():
    assert F["port_guid"]("0002:C903:000A:1B2C") == "0x0002c903000a1b2c"
    assert F["port_guid"](["0X0002C903000A1B2C", "0002c903000a1b2d"]) == ["0x0002c903000a1b2c", "0x0002c903000a1b2d"]


def test_port_guid_error_is_a_filter_error_with_fix():
    with pytest.raises(AnsibleFilterError, match=r"'0x12' is not a port GUID .*0002:c903:000a:1b2c"):
        F["port_guid"]("0x12")


def test_check_reports_ipoib_mtu_against_interfaces():
    errors = op.partition_errors(PARTS, HOSTVARS, GROUPS, {"ipoib": True, "mtu": 2048}, "sm1")[1]
    assert len(errors) == 1 and errors[0].startswith("gpu1: fabric_interfaces[0].mtu=4092")
    assert op.partition_errors(PARTS, HOSTVARS, GROUPS, {"ipoib": True, "mtu": 4096}, "sm1")[1] == []


def test_check_reports_inventory_errors_first():
    errors = op.partition_errors([dict(PARTS[0], pkey=0)], HOSTVARS, GROUPS, None, "sm1")[1]
    assert len(errors) == 1 and errors[0].startswith("sm1: opensm_partitions[0].pkey=0x0000")


def test_conf_and_allow_both():
    text = F["opensm_partitions_conf"](PARTS, HOSTVARS, GROUPS, {"ipoib": True, "mtu": 4096}, "# hdr")
    assert text.splitlines()[:2] == ["# hdr", "Default=0x7fff, ipoib, mtu=5 :"]
    assert "  0x0002c903000a1b2e=both ;" in text
    assert F["opensm_allow_both_pkeys"](PARTS, HOSTVARS, GROUPS) is True


def test_conf_raises_listing_errors():
    with pytest.raises(AnsibleFilterError, match="opensm_partitions\\[0\\].members\\[0\\].group='gpus'"):
        F["opensm_partitions_conf"](
            [dict(PARTS[0], members=[{"group": "gpus", "membership": "full"}])], HOSTVARS, GROUPS
        )


def test_ib_mtu_code():
    assert ib_mtu_code(4096) == ib_mtu_code("4096") == 5
    with pytest.raises(ValueError):
        ib_mtu_code(4092)


def test_input_errors_filter_reports_every_input_problem():
    inputs = {
        "opensm_partitions": PARTS,
        "opensm_default_partition": {"ipoib": True, "mtu": 4096},
        "opensm_port_guid": "",
        "opensm_sm_priority": 16,
        "opensm_sweep_interval": 10,
        "opensm_routing_engine": "",
        "opensm_m_key": "0xc0ffee",
        "opensm_m_key_protection_level": 0,
        "opensm_m_key_lease_period": 60,
        "opensm_sm_key": "c0ffee",
        "opensm_sa_key": "",
        "opensm_extra_options": {},
    }
    facts = {"os_family": "Debian", "distribution": "Ubuntu"}
    errors = F["opensm_input_errors"](inputs, HOSTVARS, GROUPS, "sm1", facts)
    assert [error.split()[1] for error in errors] == ["opensm_sm_priority=16", "opensm_sm_key"]
    assert not any("c0ffee" in error for error in errors)
    assert (
        F["opensm_input_errors"](dict(inputs, opensm_sm_priority=15, opensm_sm_key=""), HOSTVARS, GROUPS, "sm1", facts)
        == []
    )
