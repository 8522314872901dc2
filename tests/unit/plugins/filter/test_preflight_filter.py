from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.gpucluster.fabric.plugins.filter.preflight import (
    argument_spec_without_defaults,
    site_roles,
)
from ansible_collections.gpucluster.fabric.plugins.module_utils.concerns import roles

ROLES = Path(__file__).resolve().parents[4] / "roles"


@pytest.mark.parametrize(
    "role", sorted(p.name for p in ROLES.iterdir() if (p / "meta" / "argument_specs.yml").is_file())
)
def test_every_role_spec_validates_an_empty_inventory(role):
    data = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())
    options = argument_spec_without_defaults(data)
    assert options, role
    assert all("default" not in spec for spec in options.values())
    # Templated defaults (e.g. "{{ fabric_interfaces | default([]) }}") no longer reach the type checks.
    required = {name for name, spec in options.items() if spec.get("required")}
    result = ArgumentSpecValidator(options).validate(dict.fromkeys(required, "1.0"))
    assert not [e for e in result.error_messages if "{{" in e], result.error_messages


def test_bad_provided_value_is_still_caught():
    data = yaml.safe_load((ROLES / "rdma_modules" / "meta" / "argument_specs.yml").read_text())
    result = ArgumentSpecValidator(argument_spec_without_defaults(data)).validate(
        {"rdma_modules_fabric_interfaces": "eth1"}
    )
    assert any("rdma_modules_fabric_interfaces" in e for e in result.error_messages)


def test_suboptions_lose_defaults_too():
    data = {
        "argument_specs": {
            "main": {"options": {"a": {"type": "dict", "default": {}, "options": {"b": {"default": 1}}}}}
        }
    }
    assert argument_spec_without_defaults(data) == {"a": {"type": "dict", "options": {"b": {}}}}


def test_unknown_entry_point():
    with pytest.raises(AnsibleFilterError):
        argument_spec_without_defaults({"argument_specs": {}}, "main")


def test_site_roles_default_is_every_role_in_site_order():
    assert site_roles(None) == list(roles())
    assert site_roles(None, gpu=True, sm=False) == [r for r in roles() if r != "opensm"]
    assert site_roles(None, gpu=False, sm=True) == ["opensm", "node_check"]
    assert site_roles(None, gpu=False, sm=False) == []
    assert site_roles(None, gpu=True, sm=True) == list(roles())


def test_site_roles_from_a_list_or_an_extra_vars_string():
    assert site_roles(["nccl", "rdma_core"]) == ["rdma_core", "nccl"]
    assert site_roles("nccl, rdma_core") == ["rdma_core", "nccl"]
    assert site_roles("") == []
    assert site_roles(["nccl", "opensm"], gpu=True, sm=False) == ["nccl"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["ncl"], "'ncl' (did you mean nccl?)"),
        ("rdma_core,zzz", "'zzz'; the roles are rdma_core,"),
        ({"nccl": True}, "is not a list of role names"),
        ([1], "is not a list of role names"),
    ],
)
def test_site_roles_refuses_unknown_names(value, expected):
    with pytest.raises(AnsibleFilterError, match="gpucluster_roles") as err:
        site_roles(value)
    assert expected in str(err.value)


def test_site_roles_match_the_roles_directory():
    assert set(roles()) == {p.name for p in ROLES.iterdir() if (p / "tasks" / "main.yml").is_file()}
