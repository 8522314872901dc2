"""The registry of concerns (plugins/module_utils/concerns.py) is the one list of them: the documentation's choices
and the node's appliers follow it, and no other code lists concern names (a tuple, list, set or dict of three or
more of them, in plugins/ or tools/)."""

import ast
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpucluster.fabric.plugins.module_utils import concerns

ROOT = Path(__file__).resolve().parents[2]
NAMES = set(concerns.roles())


def _documented_choices(module, option="roles"):
    text = (ROOT / "plugins" / "modules" / f"{module}.py").read_text()
    documentation = yaml.safe_load(text.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])
    return documentation["options"][option]["choices"]


def test_the_documentation_lists_the_registrys_roles():
    assert _documented_choices("preflight") == list(concerns.roles())
    assert _documented_choices("apply") == list(concerns.applied_together())
    assert _documented_choices("apply", "role") == list(concerns.applied())


def test_the_node_runs_each_applier_the_registry_names_with_its_code():
    """The node's appliers are the registry's (a concern with ``drift``), each its record's code: nothing else lists
    them (module node_apply and the node check read ``concerns.appliers()``)."""
    found = concerns.appliers()
    assert set(found) == {c.module for c in concerns.CONCERNS if c.drift} and len(found) >= 8
    for module, (spec, run, _accepted) in found.items():
        concern = next(c for c in concerns.CONCERNS if c.module == module)
        assert run.__module__.rsplit(".", 1)[-1] == concern.code and run.__name__ == concern.run, module
        assert spec is getattr(sys.modules[run.__module__], concern.spec), module


def test_a_concern_whose_code_the_registry_does_not_import_fails_at_once(monkeypatch):
    """A new concern's code must be imported by the registry (so that it reaches the node): appliers() says so
    instead of the node missing the module."""
    record = concerns.CONCERNS[0]._replace(role="port_counters", module="gpucluster.fabric.port_counters")
    monkeypatch.setattr(concerns, "CONCERNS", (*concerns.CONCERNS, record._replace(code="port_counters")))
    with pytest.raises(KeyError, match="port_counters"):
        concerns.appliers()


def _listings(path):
    """(name it is assigned to, or the line) of each tuple, list, set or dict literal of three concern names or more."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            owner = node.targets[0].id
        else:
            continue
        for literal in ast.walk(node.value):
            items = literal.keys if isinstance(literal, ast.Dict) else getattr(literal, "elts", None)
            if not isinstance(literal, (ast.Tuple, ast.List, ast.Set, ast.Dict)) or items is None:
                continue
            named = [i.value for i in items if isinstance(i, ast.Constant) and i.value in NAMES]
            if len(named) >= 3:
                found.add(owner)
    return found


def test_no_code_but_the_registry_lists_the_concerns():
    found = set()
    for path in sorted((ROOT / "plugins").rglob("*.py")) + sorted((ROOT / "tools").rglob("*.py")):
        relative = str(path.relative_to(ROOT))
        if relative == "plugins/module_utils/concerns.py":
            continue
        found |= {(relative, owner) for owner in _listings(path)}
    assert found == set(), "list the concerns in plugins/module_utils/concerns.py and read them there"


def test_the_node_check_reads_the_intent_through_its_typed_parts():
    """The node check reads a role's part only through intent_part (typed by the registry's ``part`` or the applier's
    spec; a key the spec lacks raises): no other read of the intent's roles by name, so renaming an argument cannot
    move a check onto a fallback default."""
    import re

    text = (ROOT / "plugins" / "module_utils" / "node_check.py").read_text()
    reads = re.findall(r"\broles(?:\.get\(|\[)", text)
    # intent_part's own read, and the drift loop's (the applier's arguments, typed by params_for in drift_check).
    assert len(reads) == 2, reads
    assert "part = roles.get(role)" in text and "drift_check(host, role, roles[role], module_class)" in text


def test_a_part_types_each_key_as_the_roles_argument_spec_types_its_variable():
    """The registry's ``part`` options (the types both ends give the intent's keys) say what the role's argument
    spec says of the variable each key is made from; a key made otherwise (a role's internal var, a derived value)
    has a type of its own."""
    checked = 0
    for concern in concerns.CONCERNS:
        spec_file = ROOT / "roles" / concern.role / "meta" / "argument_specs.yml"
        options = yaml.safe_load(spec_file.read_text())["argument_specs"]["main"]["options"]
        for key, (source, option) in concern.part.items():
            assert option.get("type") in ("str", "int", "float", "bool", "list", "dict", "path"), (concern.role, key)
            if source in options:
                declared = options[source]
                assert option["type"] == declared.get("type", "str"), (concern.role, key)
                assert option.get("elements") == declared.get("elements"), (concern.role, key)
                checked += 1
    assert checked >= 11


def test_the_registry_says_what_each_role_publishes():
    """What a role's tasks register or set for others (a name with the collection's prefixes) is the registry's
    ``publishes`` of its concern: the preflight declares those names from the registry, never from the task files."""
    from ansible_collections.gpucluster.fabric.plugins.plugin_utils import declared_vars

    for concern in concerns.CONCERNS:
        role = ROOT / "roles" / concern.role
        found = set()
        for path in sorted(role.glob("tasks/*.yml")) + sorted(role.glob("handlers/*.yml")):
            found |= declared_vars._published(yaml.safe_load(path.read_text()))
        found = {name for name in found if declared_vars.has_prefix(name) and not name.startswith("_")}
        assert found == set(concern.publishes), concern.role
    assert "gpucluster_gpudirect" in concerns.published()


def test_no_code_opens_a_role_task_file():
    """A task file is a task: no plugin or tool reads one as data (a path to roles/*/tasks or handlers)."""
    import re

    path_to_tasks = re.compile(r"""(/\s*["'](tasks|handlers)["']|["'](tasks|handlers)/)""")
    found = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "plugins").rglob("*.py")) + sorted((ROOT / "tools").rglob("*.py"))
        if path_to_tasks.search(path.read_text())
    ]
    assert found == []
    assert path_to_tasks.search('for tasks in sorted(role.glob("tasks/*.yml"))')  # what it finds
