"""Every role's meta/argument_specs.yml must describe exactly its defaults, with the same default values."""

from pathlib import Path

import pytest
import yaml

ROLES = sorted(path.parent.parent for path in Path(__file__).resolve().parents[2].glob("roles/*/defaults/main.yml"))


def load(path):
    with open(path, encoding="utf-8") as stream:
        return yaml.safe_load(stream) or {}


def test_roles_found():
    assert ROLES, "no role with defaults/main.yml found"


@pytest.mark.parametrize("role", ROLES, ids=[role.name for role in ROLES])
def test_argument_specs_match_defaults(role):
    defaults = load(role / "defaults" / "main.yml")
    options = load(role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert set(defaults) == set(options), (
        f"{role.name}: only in defaults: {sorted(set(defaults) - set(options))}; "
        f"only in argument_specs: {sorted(set(options) - set(defaults))}"
    )
    for name, value in defaults.items():
        spec = options[name]
        assert spec.get("description"), f"{role.name}: {name} has no description"
        assert "type" in spec, f"{role.name}: {name} has no type"
        assert spec.get("default") == value, f"{role.name}: {name} default {spec.get('default')!r} != {value!r}"
