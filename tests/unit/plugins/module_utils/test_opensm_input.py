"""Unit tests for plugins/module_utils/opensm_input.py: one precise message per problem, never a key value."""

import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils import opensm_input as oi

SM = "sm1"
SM_GUID = "0x0002c903000a1b2c"
M_KEY = "0x00000000c0ffee01"
SM_KEY = "0x00000000000b0b01"
SA_KEY = "0x00000000000b0b02"
FACTS = {"os_family": "Debian", "distribution": "Debian"}


def inventory():
    hostvars = {
        "sm1": {"fabric_port_guids": [SM_GUID, "0x0002c903000a1b2d"]},
        "gpu1": {"fabric_port_guids": ["0002:C903:000A:1B2E"]},
    }
    groups = {"all": list(hostvars), "ungrouped": [], "subnet_managers": ["sm1"], "gpu_nodes": ["gpu1"]}
    return hostvars, groups


def good_inputs(**changes):
    inputs = {
        "opensm_partitions": [
            {"name": "gpu", "pkey": "0x0101", "members": [{"group": "gpu_nodes", "membership": "full"}]}
        ],
        "opensm_default_partition": {"membership": "full", "ipoib": True, "mtu": 4096, "full_members": []},
        "opensm_port_guid": "",
        "opensm_sm_priority": 14,
        "opensm_sweep_interval": 10,
        "opensm_routing_engine": "ftree,updn",
        "opensm_m_key": M_KEY,
        "opensm_m_key_protection_level": 1,
        "opensm_m_key_lease_period": 60,
        "opensm_sm_key": SM_KEY,
        "opensm_sa_key": SA_KEY,
        "opensm_extra_options": {"lmc": 0},
    }
    inputs.update(changes)
    return inputs


_FACTS_DEFAULT = object()


def errors_for(host=SM, facts=_FACTS_DEFAULT, hostvars=None, groups=None, **changes):
    facts = dict(FACTS) if facts is _FACTS_DEFAULT else facts
    default_hostvars, default_groups = inventory()
    return oi.input_errors(
        good_inputs(**changes),
        default_hostvars if hostvars is None else hostvars,
        default_groups if groups is None else groups,
        host,
        facts,
    )


def one_error(**changes):
    errors = errors_for(**changes)
    assert len(errors) == 1, errors
    assert errors[0].startswith(SM + ": "), errors[0]
    return errors[0]


def test_good_inputs_have_no_errors():
    assert errors_for() == []


def test_strings_from_surveys_are_numbers():
    assert errors_for(opensm_sm_priority="14", opensm_sweep_interval="10", opensm_m_key_lease_period="60") == []


# --- platform ------------------------------------------------------------------------------------------------------


def test_unsupported_os_family():
    errors = errors_for(facts={"os_family": "Suse", "distribution": "SLES"})
    assert errors == [
        "sm1: role opensm supports Debian, RedHat hosts; this host is SLES (Suse); apply the role to a supported host"
    ]


def test_missing_facts_are_an_unsupported_family():
    errors = errors_for(facts=None)
    assert len(errors) == 1 and "this host is unknown (None)" in errors[0]


def test_host_outside_subnet_managers():
    hostvars, groups = inventory()
    groups["subnet_managers"] = []
    errors = errors_for(hostvars=hostvars, groups=groups)
    assert len(errors) == 1
    assert errors[0].startswith("sm1: role opensm runs on hosts of group subnet_managers, and this host is not in it")


# --- the partition inventory ------------------------------------------------------------------------------------------


def test_partition_problems_are_included():
    error = one_error(
        opensm_partitions=[{"name": "gpu", "pkey": 0, "members": [{"group": "gpu_nodes", "membership": "full"}]}]
    )
    assert error.startswith("sm1: opensm_partitions[0].pkey=0x0000 is not a usable P_Key")


def test_empty_member_group_is_reported():
    hostvars, groups = inventory()
    groups["gpu_nodes"] = []
    errors = errors_for(hostvars=hostvars, groups=groups)
    assert len(errors) == 1 and "is an empty inventory group" in errors[0]


# --- the bound port -------------------------------------------------------------------------------------------------


def test_no_port_to_bind():
    hostvars, groups = inventory()
    hostvars["sm1"] = {}
    errors = errors_for(hostvars=hostvars, groups=groups)
    assert errors == [
        "sm1: no port GUID to bind the SM to: opensm_port_guid is empty and fabric_port_guids lists no port; list the "
        "host's port GUIDs in fabric_port_guids ('ibstat -p') or set opensm_port_guid"
    ]


def test_bad_first_fabric_port_guid_is_reported_once():
    hostvars, groups = inventory()
    hostvars["sm1"] = {"fabric_port_guids": ["0x12"]}
    errors = errors_for(hostvars=hostvars, groups=groups)
    assert len(errors) == 1 and errors[0].startswith("sm1: fabric_port_guids[0]='0x12' is not a port GUID"), errors


def test_fabric_port_guids_not_a_list_is_reported_once():
    hostvars, groups = inventory()
    hostvars["sm1"] = {"fabric_port_guids": SM_GUID}
    errors = errors_for(hostvars=hostvars, groups=groups)
    assert len(errors) == 1 and errors[0].startswith("sm1: fabric_port_guids='0x0002c903000a1b2c' is not a list")


def test_bad_opensm_port_guid():
    error = one_error(opensm_port_guid="0002:c903:000a")
    assert error.startswith("sm1: opensm_port_guid='0002:c903:000a' is not a port GUID (colon form needs four groups")
    assert "'ibstat -p' prints them" in error


def test_opensm_port_guid_must_be_a_port_of_the_host():
    error = one_error(opensm_port_guid="0002:c903:000a:1b2e")  # gpu1's port
    assert error == (
        "sm1: opensm_port_guid=0x0002c903000a1b2e is not one of this host's fabric_port_guids "
        "(0x0002c903000a1b2c, 0x0002c903000a1b2d); add it to fabric_port_guids or fix the GUID"
    )


def test_opensm_port_guid_on_a_host_without_ports():
    hostvars, groups = inventory()
    hostvars["sm1"] = {}
    errors = errors_for(hostvars=hostvars, groups=groups, opensm_port_guid=SM_GUID)
    assert errors == [
        "sm1: opensm_port_guid=0x0002c903000a1b2c is not one of this host's fabric_port_guids (none); add it to "
        "fabric_port_guids or fix the GUID"
    ]


def test_second_port_of_the_host_is_accepted():
    assert errors_for(opensm_port_guid="0x0002C903000A1B2D") == []


# --- priority, sweep, routing -----------------------------------------------------------------------------------------


def test_sm_priority_16_names_only_the_priority():
    error = one_error(opensm_sm_priority=16)
    assert error == (
        "sm1: opensm_sm_priority=16 is not a whole number in 0-15; use one in 0-15 (the highest priority becomes "
        "master, e.g. 14 on the master and 10 on a standby)"
    )
    assert "sweep" not in error and "routing" not in error


@pytest.mark.parametrize("value", [-1, "high", True, 1.5, None])
def test_sm_priority_not_a_priority(value):
    assert one_error(opensm_sm_priority=value).startswith(f"sm1: opensm_sm_priority={value!r} is not a whole number")


@pytest.mark.parametrize("value", [0, "0", "x"])
def test_sweep_interval(value):
    error = one_error(opensm_sweep_interval=value)
    assert error == (
        f"sm1: opensm_sweep_interval={value!r} is not a whole number in >= 1; use one in >= 1 "
        "(seconds between sweeps, e.g. 10)"
    )


def test_unknown_routing_engine_is_named():
    error = one_error(opensm_routing_engine="ftree, updown")
    assert error.startswith("sm1: opensm_routing_engine='ftree, updown' names unknown engine(s) 'updown'; use a")
    assert "minhop" in error and "opensm_sm_priority" not in error


def test_empty_routing_engine_element():
    assert "unknown engine(s) ''" in one_error(opensm_routing_engine="ftree,")


@pytest.mark.parametrize("value", ["", None, "  "])
def test_empty_routing_engine_keeps_default(value):
    assert errors_for(opensm_routing_engine=value) == []


def test_routing_engine_not_a_string():
    assert one_error(opensm_routing_engine=["ftree"]).startswith("sm1: opensm_routing_engine=['ftree'] is not a string")


# --- keys ---------------------------------------------------------------------------------------------------------


SECRET_LOOKING = "0xdeadbeefdeadbeef00"  # 18 hex digits: too long, and must not be shown


@pytest.mark.parametrize("name", ["opensm_m_key", "opensm_sm_key", "opensm_sa_key"])
@pytest.mark.parametrize("value", [SECRET_LOOKING, "c0ffee01", "0x", "0xc0ffee0g", 0xC0FFEE01, ["0x1"]])
def test_bad_key_names_the_variable_and_hides_the_value(name, value):
    error = one_error(**{name: value})
    assert error == (
        f"sm1: {name} is not a 64-bit key (value hidden); write it as a quoted string of 0x and 1-16 hex digits, "
        "from ansible-vault, or leave it empty"
    )


@pytest.mark.parametrize("name", ["opensm_sm_key", "opensm_sa_key"])
def test_empty_sm_and_sa_keys_are_fine(name):
    assert errors_for(**{name: ""}) == []


@pytest.mark.parametrize("m_key", ["", "0x0", "0x0000000000000000"])
def test_protection_needs_a_non_zero_m_key(m_key):
    error = one_error(opensm_m_key=m_key, opensm_m_key_protection_level=2)
    assert error == (
        "sm1: opensm_m_key_protection_level=2 needs a non-zero opensm_m_key; set the key (from ansible-vault) or use "
        "protection level 0"
    )


def test_protection_with_a_malformed_m_key_reports_the_key_only():
    error = one_error(opensm_m_key="nope", opensm_m_key_protection_level=2)
    assert error.startswith("sm1: opensm_m_key is not a 64-bit key")


def test_protection_off_needs_no_key():
    assert errors_for(opensm_m_key="", opensm_m_key_protection_level=0, opensm_m_key_lease_period=0) == []


@pytest.mark.parametrize("level", [3, -1, "two"])
def test_protection_level_range(level):
    error = one_error(opensm_m_key_protection_level=level)
    assert error.startswith(f"sm1: opensm_m_key_protection_level={level!r} is not a whole number in 0-2; use one in")


def test_protection_needs_a_lease():
    error = one_error(opensm_m_key_lease_period=0)
    assert error == (
        "sm1: opensm_m_key_lease_period=0 never expires, so with opensm_m_key_protection_level=1 a port whose SM is "
        "gone stays locked for ever; use a lease of a few sweep intervals, e.g. 60"
    )


@pytest.mark.parametrize("lease", [65536, "soon", -5])
def test_lease_range(lease):
    assert one_error(opensm_m_key_lease_period=lease).startswith(
        f"sm1: opensm_m_key_lease_period={lease!r} is not a whole number in 0-65535"
    )


# --- opensm_extra_options -------------------------------------------------------------------------------------------


def test_extra_option_managed_by_the_role():
    assert one_error(opensm_extra_options={"sm_priority": 3}) == (
        "sm1: opensm_extra_options.sm_priority is set by the role itself (opensm_sm_priority or the partition "
        "inventory); remove it from opensm_extra_options and use that variable"
    )


@pytest.mark.parametrize("key", ["Lmc", "max op vls", "1lmc", 5])
def test_extra_option_malformed(key):
    assert one_error(opensm_extra_options={key: 1}).startswith(
        f"sm1: opensm_extra_options key {key!r} is not an opensm.conf key"
    )


def test_extra_options_not_a_mapping():
    assert one_error(opensm_extra_options=["lmc 0"]).startswith("sm1: opensm_extra_options=['lmc 0'] is not a mapping")


def test_extra_options_missing_is_fine():
    assert errors_for(opensm_extra_options=None) == []


# --- all at once, secrets never shown ---------------------------------------------------------------------------------


def test_every_problem_at_once_and_no_key_value_in_any_message():
    hostvars, groups = inventory()
    groups["subnet_managers"] = []
    errors = errors_for(
        hostvars=hostvars,
        groups=groups,
        facts={"os_family": "Suse", "distribution": "SLES"},
        opensm_partitions=[{"name": "gpu", "pkey": "8101", "members": [{"group": "gpu_nodes", "membership": "full"}]}],
        opensm_port_guid="0x0002c903000a1b2e",
        opensm_sm_priority=16,
        opensm_sweep_interval=0,
        opensm_routing_engine="fattree",
        opensm_m_key="0xc0ffee01c0ffee01c0",
        opensm_sm_key="b0b01",
        opensm_sa_key="0xb0b0z",
        opensm_m_key_protection_level=2,
        opensm_m_key_lease_period=0,
        opensm_extra_options={"m_key": "0x99999999"},
    )
    variables = [
        "supports Debian, RedHat",
        "group subnet_managers",
        "opensm_partitions[0].pkey",
        "opensm_port_guid=",
        "opensm_sm_priority=16",
        "opensm_sweep_interval=0",
        "opensm_routing_engine=",
        "opensm_m_key is not",
        "opensm_sm_key is not",
        "opensm_sa_key is not",
        "opensm_m_key_lease_period=0",
        "opensm_extra_options.m_key",
    ]
    assert len(errors) == len(variables), errors
    for error, expected in zip(errors, variables):
        assert expected in error, (expected, error)
    text = "\n".join(errors).lower()
    for secret in ("c0ffee01", "b0b01", "b0b0z", "99999999"):
        assert secret not in text


def test_good_key_values_never_appear_in_other_messages():
    errors = errors_for(opensm_sm_priority=99, opensm_m_key_lease_period=0, opensm_extra_options={"sa_key": SA_KEY})
    assert len(errors) == 3
    text = "\n".join(errors).lower()
    for secret in (M_KEY, SM_KEY, SA_KEY, "c0ffee01", "b0b01", "b0b02"):
        assert secret not in text


def test_managed_keys_match_the_template():
    """Every key opensm.conf.j2 writes from a role variable is refused in opensm_extra_options, and no other."""
    import re
    from pathlib import Path

    template = Path(__file__).resolve().parents[4] / "roles" / "opensm" / "templates" / "opensm.conf.j2"
    written = set(re.findall(r"^([a-z][a-z0-9_]*) \{\{", template.read_text(), re.MULTILINE))
    assert written == set(oi.MANAGED_KEYS)
