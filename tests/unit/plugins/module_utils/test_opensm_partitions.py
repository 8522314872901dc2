"""Unit tests for plugins/module_utils/opensm_partitions.py: every bad input must name host, variable, value, fix."""

import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils import opensm_partitions as op

SM = "sm1"


def inventory(**extra_hostvars):
    hostvars = {
        "sm1": {"fabric_port_guids": ["0x0002c903000a1b2c"]},
        "gpu1": {"fabric_port_guids": ["0002:C903:000A:1B2E", "0x0002c903000a1b40"]},
        "gpu2": {"fabric_port_guids": ["0X0002C903000A1B30"]},
        "storage1": {"fabric_port_guids": ["0002c903000a1b50"]},
    }
    for host, hv in extra_hostvars.items():
        hostvars.setdefault(host, {}).update(hv)
    groups = {
        "all": list(hostvars),
        "ungrouped": [],
        "subnet_managers": ["sm1"],
        "gpu_nodes": ["gpu1", "gpu2"],
        "storage": ["storage1"],
    }
    return hostvars, groups


def check(partitions, default=None, **extra):
    hostvars, groups = inventory(**extra)
    model, errors = op.resolve_partitions(partitions, hostvars, groups, default, SM)
    return model, errors


def one_error(partitions, default=None, **extra):
    _model, errors = check(partitions, default, **extra)
    assert len(errors) == 1, errors
    return errors[0]


GPU = {
    "name": "gpu",
    "pkey": "0x0101",
    "ipoib": True,
    "mtu": 4096,
    "members": [{"group": "gpu_nodes", "membership": "full"}],
}


# --- GUID normalisation -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "0x0002c903000a1b2c",
        "0X0002C903000A1B2C",
        "0002c903000a1b2c",
        "0002:c903:000a:1b2c",
        "0002:C903:000A:1B2C",
        "  0x0002c903000A1b2c\n",
    ],
)
def test_normalize_port_guid_accepts_pasted_forms(raw):
    assert op.normalize_port_guid(raw) == "0x0002c903000a1b2c"


@pytest.mark.parametrize(
    "raw, reason",
    [
        ("0x2c903000a1b2c", "16 hex digits"),  # ibnetdiscover drops leading zeros: must be padded by the user
        ("0x0002c903000a1b2c0", "16 hex digits"),
        ("0x0002c903000a1b2g", "16 hex digits"),
        ("0002:c903:0a:1b2c00", "four groups"),
        ("fe80:0000:0000:0000:0002:c903:000a:1b2c", "four groups"),
        ("0x0000000000000000", "zero GUID"),
        (11259172008102700, "not a string"),
        (None, "not a string"),
        (True, "not a string"),
    ],
)
def test_normalize_port_guid_rejects(raw, reason):
    with pytest.raises(ValueError, match=reason):
        op.normalize_port_guid(raw)


def test_bad_guid_in_inventory_names_host_variable_value_and_fix():
    msg = one_error([], gpu2={"fabric_port_guids": ["0X0002C903000A1B30", "0002:c903:1b2c"]})
    assert msg.startswith("gpu2: fabric_port_guids[1]='0002:c903:1b2c' is not a port GUID")
    assert "ibstat -p" in msg and "0x0002c903000a1b2c" in msg


def test_fabric_port_guids_must_be_a_list():
    msg = one_error([], gpu2={"fabric_port_guids": "0x0002c903000a1b30"})
    assert msg.startswith("gpu2: fabric_port_guids='0x0002c903000a1b30' is not a list")


def test_duplicate_guid_across_hosts_in_different_forms():
    msg = one_error([], gpu2={"fabric_port_guids": ["0002:C903:000A:1B2C"]})
    assert msg.startswith("gpu2: fabric_port_guids[0]=0x0002c903000a1b2c is also listed by host sm1")
    assert "remove it where it is wrong" in msg


def test_duplicate_guid_on_one_host():
    msg = one_error([], gpu2={"fabric_port_guids": ["0x0002c903000a1b30", "0002:c903:000a:1b30"]})
    assert msg == "gpu2: fabric_port_guids[1]=0x0002c903000a1b30 repeats fabric_port_guids[0]; list each port once"


# --- P_Keys ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, low15",
    [("0x0001", 0x0001), ("0x7ffe", 0x7FFE), ("0x8101", 0x0101), (0x0101, 0x0101), ("0X0A0b", 0x0A0B), (1, 1)],
)
def test_pkey_accepted_and_masked_to_low_15_bits(raw, low15):
    model, errors = check([dict(GPU, pkey=raw)])
    assert errors == []
    assert model["partitions"][0]["pkey"] == low15


@pytest.mark.parametrize(
    "raw, shown, reason",
    [
        ("0x0000", "'0x0000'", "0x0000 is invalid"),
        ("0x8000", "'0x8000'", "low 15 bits are 0x0000"),
        ("0x7fff", "'0x7fff'", "0x7fff is the Default partition"),
        (0xFFFF, "0xffff", "0x7fff is the Default partition"),
        ("8001", "'8001'", "write it as hex with 0x"),
        (0x10000, "0x10000", "16 bits"),
        (True, "True", "boolean"),
        (None, "None", "missing"),
    ],
)
def test_pkey_rejected_with_value_and_fix(raw, shown, reason):
    part = dict(GPU, pkey=raw)
    if raw is None:
        del part["pkey"]
    msg = one_error([part])
    assert msg.startswith(f"sm1: opensm_partitions[0].pkey={shown} is not a usable P_Key ("), msg
    assert reason in msg
    assert msg.endswith("pick an unused value in 0x0001-0x7ffe")


def test_pkey_uniqueness_is_by_low_15_bits():
    other = dict(GPU, name="gpu-full", pkey="0x8101")
    msg = one_error([GPU, other])
    assert msg.startswith("sm1: opensm_partitions[1].pkey='0x8101' has the same low 15 bits (0x0101)")
    assert "opensm_partitions[0].pkey" in msg and "OpenSM would merge them" in msg


# --- partition names and shapes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["gpu", "A", "train-01", "storage.io", "x" * 31, "p+q_r"])
def test_partition_name_ok(name):
    assert check([dict(GPU, name=name)])[1] == []


@pytest.mark.parametrize("name", ["", "two words", "a,b", "a=b", "a:b", "a;b", "a#b", "-lead", "x" * 32, 7, None])
def test_partition_name_syntax(name):
    msg = one_error([dict(GPU, name=name)])
    assert msg.startswith(f"sm1: opensm_partitions[0].name={name!r} is not a partition name")
    assert "1-31 characters" in msg


def test_partition_name_default_is_reserved():
    msg = one_error([dict(GPU, name="default")])
    assert "reserved for the Default partition" in msg and "opensm_default_partition" in msg


def test_partition_names_unique():
    msg = one_error([GPU, dict(GPU, pkey="0x0102")])
    assert msg == (
        "sm1: opensm_partitions[1].name='gpu' is already used by opensm_partitions[0]; give each partition its own name"
    )


def test_unknown_partition_key_is_reported():
    msg = one_error([dict(GPU, memebers=[])])
    assert msg.startswith("sm1: opensm_partitions[0] has unknown key(s) memebers; allowed:")


@pytest.mark.parametrize(("members", "shown"), [("missing", "missing"), (None, "members: null"), ([], "members: []")])
def test_partition_without_members_is_refused_the_same_way(members, shown):
    # One rule for a missing key, `members:` left empty (YAML null) and `members: []`; null and [] used to
    # render the partition as a comment without a word.
    part = dict(GPU)
    if members == "missing":
        del part["members"]
    else:
        part["members"] = members
    msg = one_error([part])
    assert msg.startswith(f"sm1: opensm_partitions[0] has no members ({shown}); list at least one")
    assert "leave it out of opensm_partitions until it has one" in msg
    with pytest.raises(op.PartitionError):
        render([part])


# --- members --------------------------------------------------------------------------------------------------------


def test_unknown_group():
    msg = one_error([dict(GPU, members=[{"group": "gpu_node", "membership": "full"}])])
    assert msg.startswith("sm1: opensm_partitions[0].members[0].group='gpu_node' is not an inventory group")
    assert "known: all, gpu_nodes, storage, subnet_managers" in msg


def test_unknown_host():
    msg = one_error([dict(GPU, members=[{"host": "gpu9", "membership": "full"}])])
    assert msg == (
        "sm1: opensm_partitions[0].members[0].host='gpu9' is not an inventory host; add the host or fix the name"
    )


def test_group_host_without_guids():
    hostvars, groups = inventory()
    hostvars["gpu3"] = {}
    groups["all"].append("gpu3")
    groups["gpu_nodes"].append("gpu3")
    _model, errors = op.resolve_partitions([GPU], hostvars, groups, None, SM)
    assert errors == [
        "sm1: opensm_partitions[0].members[0] (group gpu_nodes) includes host gpu3, which has no fabric_port_guids; "
        "list its port GUIDs ('ibstat -p') or take it out of the group"
    ]


def test_member_needs_exactly_one_selector_and_membership():
    _m, errors = check(
        [
            dict(
                GPU,
                members=[
                    {"group": "gpu_nodes", "host": "sm1", "membership": "full"},
                    {"host": "sm1", "membership": "partial"},
                    {"host": "sm1"},
                    "gpu1",
                ],
            )
        ]
    )
    assert len(errors) == 4, errors
    assert "members[0]" in errors[0] and "exactly one of group, host or guid" in errors[0]
    assert errors[1].startswith("sm1: opensm_partitions[0].members[1].membership='partial' is not a membership")
    assert errors[2].startswith("sm1: opensm_partitions[0].members[2].membership=None is not a membership")
    assert errors[3].startswith("sm1: opensm_partitions[0].members[3]='gpu1' is not a mapping")


def test_raw_guid_member_is_normalised_and_checked():
    model, errors = check([dict(GPU, members=[{"guid": "0002:C903:00FF:0001", "membership": "limited"}])])
    assert errors == []
    assert model["partitions"][0]["members"] == {"0x0002c90300ff0001": "limited"}
    msg = one_error([dict(GPU, members=[{"guid": "0x12", "membership": "limited"}])])
    assert msg.startswith("sm1: opensm_partitions[0].members[0].guid='0x12' is not a port GUID")


def test_conflicting_membership_for_one_port():
    msg = one_error(
        [dict(GPU, members=[{"group": "gpu_nodes", "membership": "full"}, {"host": "gpu2", "membership": "limited"}])]
    )
    assert msg.startswith(
        "sm1: opensm_partitions[0].members[1] (host gpu2) gives port 0x0002c903000a1b30 membership limited but "
        "opensm_partitions[0].members[0] (group gpu_nodes) already gave it full"
    )
    assert "use membership both" in msg


def test_same_membership_twice_is_merged():
    model, errors = check(
        [dict(GPU, members=[{"group": "gpu_nodes", "membership": "full"}, {"host": "gpu1", "membership": "full"}])]
    )
    assert errors == []
    assert len(model["partitions"][0]["members"]) == 3


# --- allow_both_pkeys -----------------------------------------------------------------------------------------------


def test_both_membership_turns_on_allow_both_pkeys():
    model, errors = check([dict(GPU, members=[{"host": "storage1", "membership": "both"}])])
    assert errors == []
    assert model["allow_both_pkeys"] is True
    assert model["partitions"][0]["members"] == {"0x0002c903000a1b50": "both"}


def test_no_both_membership_keeps_allow_both_pkeys_off():
    model, errors = check(
        [GPU, dict(GPU, name="st", pkey="0x0200", members=[{"group": "storage", "membership": "limited"}])]
    )
    assert errors == []
    assert model["allow_both_pkeys"] is False


# --- MTU and rate ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mtu", [4096, "4096"])
def test_partition_mtu_as_int_or_digit_string(mtu):
    # "4096" passed the role's argument spec (type int) and was then refused here; one rule now: both are 4096.
    assert render([dict(GPU, mtu=mtu)]).endswith(
        "gpu=0x0101, ipoib, mtu=5 :\n  0x0002c903000a1b2e=full\n"
        "  0x0002c903000a1b30=full\n  0x0002c903000a1b40=full ;\n"
    )


@pytest.mark.parametrize("mtu", [4092, 9000, 65520, 5, True])
def test_partition_mtu_rejected(mtu):
    msg = one_error([dict(GPU, mtu=mtu)])
    assert msg.startswith(f"sm1: opensm_partitions[0].mtu={mtu!r} is invalid (IB MTU must be one of 256, 512, 1024")


@pytest.mark.parametrize("sl", [3, "3"])
def test_sl_as_int_or_digit_string(sl):
    assert "gpu=0x0101, ipoib, mtu=5, sl=3 :" in render([dict(GPU, sl=sl)])


def test_partition_mtu_error_names_value_and_fix():
    msg = one_error([dict(GPU, mtu=4092)])
    assert msg.startswith("sm1: opensm_partitions[0].mtu=4092 is invalid (IB MTU must be one of")
    assert "use the IB MTU in bytes, e.g. 4096" in msg


def test_mtu_without_ipoib_is_an_error():
    msg = one_error([dict(GPU, ipoib=False)])
    assert msg.startswith("sm1: opensm_partitions[0].mtu=4096 only applies to the IPoIB broadcast group")


@pytest.mark.parametrize(("value", "ipoib"), [("true", True), ("True", True), ("yes", True), ("false", False)])
def test_ipoib_strings_read_as_booleans(value, ipoib):
    # AWX surveys and -e pass "true"; the bool filter takes it, so the partition rule does too.
    part = dict(GPU, ipoib=value)
    if not ipoib:
        del part["mtu"]
    model, errors = check([part], {"membership": "full", "ipoib": value})
    assert errors == []
    assert model["partitions"][0]["ipoib"] is ipoib
    assert ("ipoib" in model["partitions"][0]["flags"]) is ipoib
    assert model["default"]["ipoib"] is ipoib


def test_ipoib_that_is_not_a_boolean():
    msg = one_error([dict(GPU, ipoib="maybe", mtu=None)])
    assert msg.startswith("sm1: opensm_partitions[0].ipoib='maybe' is not a boolean; write true or false")


@pytest.mark.parametrize("rate, code", [(10, 3), (2.5, 2), (56, 12), (100, 16), (200, 17), (400, 21)])
def test_rate_gbps_to_code(rate, code):
    assert op.rate_gbps_to_code(rate) == code


def test_rate_and_sl_errors():
    _m, errors = check([dict(GPU, rate=3, sl=16)])
    assert len(errors) == 2
    assert errors[0].startswith("sm1: opensm_partitions[0].rate=3 is invalid (rate must be one of")
    assert errors[1] == "sm1: opensm_partitions[0].sl=16 is not a service level; use 0-15 or leave it out"


# --- IPoIB MTU cross-check against fabric_interfaces ---------------------------------------------------------------


def ipoib_errors(partitions, default, interfaces_by_host):
    hostvars, groups = inventory(**{h: {"fabric_interfaces": i} for h, i in interfaces_by_host.items()})
    model, errors = op.resolve_partitions(partitions, hostvars, groups, default, SM)
    assert errors == []
    return op.ipoib_mtu_errors(model, hostvars)


IB0_4092 = [{"name": "ib0", "kind": "ipoib", "mode": "datagram", "mtu": 4092}]


def test_interface_mtu_above_default_partition_group_mtu():
    errors = ipoib_errors([], {"ipoib": True, "mtu": 2048}, {"gpu1": IB0_4092})
    assert errors == [
        "gpu1: fabric_interfaces[0].mtu=4092 (ib0, datagram) is above 2044, the most the IPoIB broadcast group of "
        "opensm_default_partition (mtu 2048) allows; set opensm_default_partition.mtu: 4096 if every port runs 4K "
        "MTU, or lower the interface MTU to 2044"
    ]


def test_default_partition_mtu_defaults_to_opensm_2048():
    assert len(ipoib_errors([], {"ipoib": True}, {"gpu1": IB0_4092})) == 1


def test_interface_mtu_fits_4k_group():
    assert ipoib_errors([], {"ipoib": True, "mtu": 4096}, {"gpu1": IB0_4092}) == []


def test_connected_mode_is_not_capped_by_group():
    iface = [{"name": "ib0", "kind": "ipoib", "mode": "connected", "mtu": 65520}]
    assert ipoib_errors([], {"ipoib": True, "mtu": 2048}, {"gpu1": iface}) == []


def test_child_interface_matches_its_partition_by_pkey_suffix():
    iface = [{"name": "ib0.8101", "kind": "ipoib", "mtu": 4092}]
    errors = ipoib_errors([dict(GPU, mtu=2048)], {"ipoib": True, "mtu": 4096}, {"gpu1": iface})
    assert len(errors) == 1 and "opensm_partitions[0] (mtu 2048)" in errors[0]
    assert ipoib_errors([GPU], {"ipoib": True, "mtu": 2048}, {"gpu1": iface}) == []


def test_child_interface_on_partition_without_ipoib():
    iface = [{"name": "ib0", "pkey": "0x8101", "kind": "ipoib", "mtu": 2044}]
    part = {"name": "gpu", "pkey": "0x0101", "members": [{"group": "gpu_nodes", "membership": "full"}]}
    errors = ipoib_errors([part], {"ipoib": True}, {"gpu1": iface})
    assert len(errors) == 1 and "ipoib off" in errors[0] and "set opensm_partitions[0].ipoib: true" in errors[0]


def test_non_member_host_is_not_checked_against_partition():
    iface = [{"name": "ib0.8101", "kind": "ipoib", "mtu": 4092}]
    assert ipoib_errors([dict(GPU, mtu=2048)], {"ipoib": True, "mtu": 4096}, {"storage1": iface}) == []


def test_roce_interfaces_ignored():
    iface = [{"name": "eth2", "kind": "roce", "mtu": 9000}]
    assert ipoib_errors([], {"ipoib": True, "mtu": 2048}, {"gpu1": iface}) == []


# --- Default partition ----------------------------------------------------------------------------------------------


def test_default_membership_policy_must_be_full_or_limited():
    msg = one_error([], {"membership": "both"})
    assert msg.startswith("sm1: opensm_default_partition.membership='both' is not a Default policy")


def test_default_unknown_key():
    msg = one_error([], {"membersip": "limited"})
    assert msg.startswith("sm1: opensm_default_partition has unknown key(s) membersip")


# --- rendering ------------------------------------------------------------------------------------------------------


def render(partitions, default=None, header=""):
    hostvars, groups = inventory()
    return op.partitions_conf(partitions, hostvars, groups, default, SM, header)


def test_render_without_partitions_still_writes_explicit_default():
    assert render([]) == "Default=0x7fff :\n  ALL=full ;\n"


def test_render_full_example():
    text = render(
        [
            GPU,
            {
                "name": "storage",
                "pkey": 0x0200,
                "sl": 1,
                "members": [
                    {"group": "storage", "membership": "full"},
                    {"group": "gpu_nodes", "membership": "limited"},
                    {"guid": "0002:c903:00ff:0001", "membership": "both"},
                ],
            },
        ],
        {"membership": "limited", "ipoib": True, "mtu": 4096, "rate": 100, "full_members": [{"group": "storage"}]},
        header="# managed",
    )
    assert text == (
        "# managed\n"
        "Default=0x7fff, ipoib, mtu=5, rate=16 :\n"
        "  ALL=limited\n"
        "  ALL_SWITCHES=full\n"
        "  SELF=full\n"
        "  0x0002c903000a1b50=full ;\n"
        "\n"
        "gpu=0x0101, ipoib, mtu=5 :\n"
        "  0x0002c903000a1b2e=full\n"
        "  0x0002c903000a1b30=full\n"
        "  0x0002c903000a1b40=full ;\n"
        "\n"
        "storage=0x0200, sl=1 :\n"
        "  0x0002c903000a1b2e=limited\n"
        "  0x0002c903000a1b30=limited\n"
        "  0x0002c903000a1b40=limited\n"
        "  0x0002c903000a1b50=full\n"
        "  0x0002c90300ff0001=both ;\n"
    )


def test_render_is_independent_of_inventory_order():
    members = [{"host": "gpu2", "membership": "full"}, {"host": "gpu1", "membership": "full"}]
    assert render([dict(GPU, members=members)]) == render([dict(GPU, members=list(reversed(members)))])


def test_empty_member_group_is_an_error_naming_partition_group_and_fix():
    # It used to turn the partition into a comment in partitions.conf, silently.
    hostvars, groups = inventory()
    groups["empty"] = []
    members = [{"group": "empty", "membership": "full"}]
    model, errors = op.resolve_partitions([dict(GPU, members=members)], hostvars, groups, None, SM)
    assert errors == [
        "sm1: opensm_partitions[0].members[0].group='empty' is an empty inventory group, so it gives partition gpu "
        "no port; add the hosts to group empty, name the group they are in, or remove this member"
    ]
    # The same in the Default partition's full_members.
    _model, errors = op.resolve_partitions([], hostvars, groups, {"full_members": [{"group": "empty"}]}, SM)
    assert len(errors) == 1 and "gives partition Default no port" in errors[0]


def test_member_group_without_port_guids_is_an_error():
    hostvars, groups = inventory()
    groups["new"] = ["gpu3"]
    hostvars["gpu3"] = {}
    _model, errors = op.resolve_partitions(
        [dict(GPU, members=[{"group": "new", "membership": "full"}])], hostvars, groups, None, SM
    )
    assert any("(group new) includes host gpu3, which has no fabric_port_guids" in e for e in errors), errors


def test_render_refuses_invalid_inventory_listing_all_errors():
    with pytest.raises(op.PartitionError) as info:
        render([dict(GPU, pkey="0x7fff", name="a b")])
    assert len(info.value.errors) == 2


def test_render_10000_guids_keeps_lines_short():
    hostvars = {f"n{i:05d}": {"fabric_port_guids": [f"0x{0x0002C90300000000 + i:016x}"]} for i in range(1, 10001)}
    groups = {"all": list(hostvars), "gpu_nodes": list(hostvars)}
    text = op.partitions_conf([GPU], hostvars, groups)
    lines = text.splitlines()
    assert len(lines) == 2 + 1 + 1 + 10000
    assert max(len(line) for line in lines) < 4096
