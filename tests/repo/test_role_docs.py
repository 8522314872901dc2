"""Every role's meta/argument_specs.yml describes exactly its defaults, and its README's variable table is current."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]  # repository-level test: tools/ is not shipped
_spec = importlib.util.spec_from_file_location("role_docs", ROOT / "tools" / "role_docs.py")
role_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(role_docs)

ROLES = sorted(path.parent.parent for path in ROOT.glob("roles/*/meta/argument_specs.yml"))


def test_roles_found():
    assert ROLES, "no role with meta/argument_specs.yml found"


@pytest.mark.parametrize("role", ROLES, ids=[role.name for role in ROLES])
def test_argument_specs_match_defaults(role):
    assert role_docs.disagreements(role) == []


@pytest.mark.parametrize("role", ROLES, ids=[role.name for role in ROLES])
def test_every_option_documented(role):
    options = role_docs.load(role / "meta" / "argument_specs.yml")["argument_specs"]["main"].get("options") or {}
    for name, option in options.items():
        assert option.get("description"), f"{role.name}: {name} has no description"
        assert "type" in option, f"{role.name}: {name} has no type"


def test_disagreement_is_detected(tmp_path):
    role = tmp_path / "demo"
    (role / "defaults").mkdir(parents=True)
    (role / "meta").mkdir()
    (role / "defaults" / "main.yml").write_text("demo_a: 1\ndemo_b: x\n")
    (role / "meta" / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    options:\n      demo_a: {type: int, default: 2, description: a}\n"
    )
    problems = role_docs.disagreements(role)
    assert any("demo_b is in defaults/main.yml but not in meta/argument_specs.yml" in p for p in problems)
    assert any("demo_a defaults to 1 but argument_specs says 2" in p for p in problems)
