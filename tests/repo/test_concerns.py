"""The registry of concerns (plugins/module_utils/concerns.py) is the one list of them: the documentation's choices
and the node's appliers follow it, and no other code lists concern names (a tuple, list, set or dict of three or
more of them, in plugins/ or tools/)."""

import ast
from pathlib import Path

import yaml
from ansible_collections.gpucluster.fabric.plugins.module_utils import concerns, node_apply

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


def test_the_node_runs_an_applier_for_each_concern_that_has_one():
    assert {name.rsplit(".", 1)[-1] for name in node_apply.APPLIERS} == set(concerns.appliers().values())
    for module, (_spec, run, *_rest) in node_apply.APPLIERS.items():
        assert run.__module__.rsplit(".", 1)[-1] == concerns.get(concerns.appliers()[module]).code, module


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


def _intent_keys(role):
    """The keys of ``role``'s part of the intent: its applier's arguments less what the intent leaves out, or what
    role_checks.INTENT_VARS names for a role whose part is made from its variables."""
    from ansible_collections.gpucluster.fabric.plugins.plugin_utils.role_checks import INTENT_VARS

    concern = concerns.get(role)
    if role not in INTENT_VARS:
        return set(concern.args) - set(concern.leave_out)
    source, _leave_out, *extra = INTENT_VARS[role]
    keys = set(source) if isinstance(source, dict) else set()
    keys |= set(extra[0]) if extra else set()
    return keys | ({"applier"} if concern.module else set())


def test_the_node_check_reads_only_keys_the_intent_has():
    """The node check reads other roles' parts by key: each key it reads is one the registry (or INTENT_VARS) puts
    there, so renaming an argument fails here instead of moving the check onto its fallback default."""
    import re

    text = (ROOT / "plugins" / "module_utils" / "node_check.py").read_text()
    reads = set(re.findall(r'\(roles\.get\("(\w+)"\) or \{\}\)\.get\("(\w+)"', text))
    reads |= {("fabric_validate", key) for key in re.findall(r'\bvalidate\.get\("(\w+)"', text)}
    reads |= {("opensm", key) for key in re.findall(r'\bopensm\.get\("(\w+)"', text)}
    assert len(reads) >= 15, sorted(reads)
    unknown = sorted((role, key) for role, key in reads if key not in _intent_keys(role))
    assert unknown == [], unknown
