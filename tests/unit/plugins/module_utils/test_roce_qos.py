"""RoCE QoS input: defaults that agree, contradictions refused with variable and fix, the dcb/sysfs/configfs plan."""

import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils.roce_qos import (
    interface_settings,
    qos_errors,
    resolved_settings,
    tos_dscp,
    tos_ecn,
)

DEFAULTS = {"trust": "dscp", "pfc_priorities": [3], "dscp_map": {26: 3, 48: 6}, "tos": 106, "ecn": True}
IFACES = [
    {"name": "ens1f0", "kind": "roce", "mtu": 9000},
    {"name": "ens2f0", "kind": "roce"},
    {"name": "ib0", "kind": "ipoib"},
]


def test_tos_106_is_dscp_26_ect0():
    assert (tos_dscp(106), tos_ecn(106)) == (26, 2)
    assert (tos_dscp(104), tos_ecn(104)) == (26, 0)


def test_defaults_agree_and_apply_to_roce_interfaces_only():
    assert qos_errors("gpu1", DEFAULTS, {}, IFACES) == []
    settings = interface_settings(DEFAULTS, {"ens2f0": {"pfc_priorities": [3, 4]}}, IFACES)
    assert sorted(settings) == ["ens1f0", "ens2f0"]
    assert settings["ens1f0"]["pfc_priorities"] == [3]
    assert settings["ens2f0"]["pfc_priorities"] == [3, 4]
    assert settings["ens2f0"]["tos"] == 106


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"pfc_priorities": [8]}, "roce_qos_pfc_priorities[0]=8 is not a priority: use 0-7"),
        ({"pfc_priorities": []}, "roce_qos_pfc_priorities=[] must be a non-empty list"),
        ({"dscp_map": {64: 3}}, "roce_qos_dscp_map key 64 is not a DSCP value: use 0-63"),
        ({"dscp_map": {26: 9}}, "roce_qos_dscp_map[26]=9 is not a priority"),
        ({"tos": 256}, "roce_qos_tos=256 is not a ToS byte"),
        ({"trust": "l2"}, "roce_qos_trust='l2' is not a trust mode"),
        ({"ecn": "maybe"}, "roce_qos_ecn='maybe' must be true or false"),
        # A ToS whose DSCP maps to no PFC priority: lossy RoCE.
        ({"tos": 130}, "roce_qos_tos=130 marks DSCP 32, which roce_qos_dscp_map does not map to a priority"),
        ({"pfc_priorities": [4]}, "maps to priority 3, not one of roce_qos_pfc_priorities [4]: RoCE traffic would be"),
        ({"tos": 104}, "roce_qos_tos=104 is Not-ECT while roce_qos_ecn is true"),
    ],
)
def test_bad_values_fail_with_variable_and_fix(change, expected):
    errors = qos_errors("gpu1", dict(DEFAULTS, **change), {}, IFACES)
    assert errors, change
    assert all(e.startswith("gpu1: ") for e in errors)
    assert any(expected in e for e in errors), errors
    # One message per problem, not one per interface.
    assert len(errors) == len(set(errors))


def test_ecn_off_accepts_not_ect():
    assert qos_errors("gpu1", dict(DEFAULTS, tos=104, ecn=False), {}, IFACES) == []
    assert qos_errors("gpu1", dict(DEFAULTS, tos=104, ecn="false"), {}, IFACES) == []


def test_overrides_are_checked_per_interface():
    errors = qos_errors(
        "gpu1",
        DEFAULTS,
        {"ens2f0": {"pfc_priorities": [9]}, "ens9": {"tos": 106}, "ens1f0": {"colour": "red"}},
        IFACES,
    )
    joined = "\n".join(errors)
    assert "roce_qos_interface_overrides.ens2f0.pfc_priorities[0]=9 is not a priority" in joined
    assert "roce_qos_interface_overrides names 'ens9', which is not a RoCE interface" in joined
    assert "roce_qos_interface_overrides.ens1f0 has unknown keys ['colour']" in joined


def test_nccl_traffic_class_must_agree():
    assert qos_errors("gpu1", DEFAULTS, {}, IFACES, {"NCCL_IB_TC": "106"}) == []
    # nccl.conf not managed by role nccl: nothing to compare.
    assert qos_errors("gpu1", DEFAULTS, {}, IFACES, None) == []
    # Managed, and no NCCL_IB_TC: NCCL's verbs connections would use traffic class 0.
    errors = qos_errors("gpu1", DEFAULTS, {}, IFACES, {"NCCL_SOCKET_IFNAME": ["eth0"]})
    assert "nccl_conf sets no NCCL_IB_TC while ens1f0 trusts DSCP with ToS 106" in errors[0]
    assert errors[0].endswith("add NCCL_IB_TC: 106 to nccl_conf")
    errors = qos_errors("gpu1", DEFAULTS, {}, IFACES, {"NCCL_IB_TC": 96})
    assert errors and "nccl_conf.NCCL_IB_TC=96 contradicts the ToS 106 of ens1f0" in errors[0]
    pcp = dict(DEFAULTS, trust="pcp")
    assert qos_errors("gpu1", pcp, {}, IFACES, {"NCCL_IB_SL": "3"}) == []
    assert qos_errors("gpu1", pcp, {}, IFACES, {}) == []
    errors = qos_errors("gpu1", pcp, {}, IFACES, {"NCCL_IB_SL": "5"})
    assert errors and "nccl_conf.NCCL_IB_SL='5' is not a PFC priority of ens1f0 ([3])" in errors[0]


def test_resolved_settings_are_normalised():
    settings = resolved_settings(dict(DEFAULTS, ecn="yes", pfc_priorities=[3, 3]), {"ens2f0": {"tos": 104}}, IFACES)
    assert settings["ens1f0"] == {
        "trust": "dscp",
        "pfc_priorities": [3],
        "dscp_map": {26: 3, 48: 6},
        "tos": 106,
        "ecn": True,
    }
    assert settings["ens2f0"]["tos"] == 104
