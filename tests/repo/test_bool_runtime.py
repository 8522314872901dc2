"""ansible-core itself evaluates each condition that reads a boolean switch, with the switch given as a string.

`-e x=false` and an AWX survey pass "false". For every boolean variable (tools/bool_uses.py finds them) and every
conditional of roles/ and playbooks/ that reads it, directly or through role vars, set_fact and task vars, the
condition is evaluated with Templar.evaluate_conditional (what `when:`, `that:`, `failed_when:` use in 2.19) for
"true", "yes", "True" and True, then "false", "no", "False" and False: each string must give the boolean's result.
The templated strings and templates that read a switch directly are rendered the same way.

The other variables come from every role's defaults and vars, the tasks' set_fact and vars; registered results and
facts come from STAND_INS, chosen so that each switch decides at least one result (test_switch_decides). An
expression that still lacks a variable is skipped with the reason (pytest -ra lists them), never passed silently.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]  # repository-level test: tools/ is not shipped
_spec = importlib.util.spec_from_file_location("bool_uses", ROOT / "tools" / "bool_uses.py")
bool_uses = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bool_uses  # dataclasses look their module up there
_spec.loader.exec_module(bool_uses)

template = pytest.importorskip("ansible.template")
pytestmark = pytest.mark.usefixtures("collection_loader")
from ansible.errors import AnsibleBrokenConditionalError, AnsibleUndefinedVariable  # noqa: E402
from ansible.parsing.dataloader import DataLoader  # noqa: E402
from jinja2 import nodes  # noqa: E402

NAMES, _ = bool_uses.boolean_variables(ROOT)
TRUE_SPELLINGS = ("true", "yes", "True", True)
FALSE_SPELLINGS = ("false", "no", "False", False)

# Registered results and facts (what a host would have given), chosen so that the switch, not these, decides.
STAND_INS = {
    "ansible_check_mode": False,
    "ansible_managed": "Ansible managed",
    "inventory_hostname": "gpu1",
    "ansible_run_tags": ["all"],  # a run without --tags or --skip-tags
    "ansible_skip_tags": [],
    # Gathered facts of a Debian 12 host: ansible-core 2.19.0 fails `ansible_facts['os_family'] | default(none)` when
    # ansible_facts itself is undefined (later 2.19 releases give the default).
    "ansible_facts": {"os_family": "Debian", "distribution": "Debian", "distribution_major_version": "12"},
    "groups": {"all": ["gpu1"], "ungrouped": [], "gpu_nodes": ["gpu1"]},
    "__fabric_interfaces_host": {"links": {}, "backend": "ifupdown", "sysctls_present": []},
    "__nccl_changing": ["libnccl2"],
    "__nccl_madison": {"stdout": ""},
    "__nccl_dpkg": {"stdout": ""},
    "__nccl_dpkg_installed": {},
    "__nccl_package_version": "2.21.5-1+cuda12.4",
    "__gpucluster_offered_nccl": {"libnccl2": ["2.21.5-1+cuda12.4"]},
    "__opensm_was_running": True,
    "__opensm_configured": {"partitions_changed": True, "config_changed": True, "dropin_changed": False},
    "__fabric_validate_report": {
        "failures": {"gpu1": ["gpu1: rdma/ib_write_bw[gpu2] measured 1 Gb/s, threshold 9 Gb/s"]}
    },
}

LOADER = DataLoader()


def _load(path):
    return LOADER.load_from_file(str(path), trusted_as_template=True) or {}


def _task_files():
    return [path for path in bool_uses.source_files(ROOT) if path.suffix in (".yml", ".yaml")]


def _walk_tasks(data, path, scope, scopes, facts):
    """Record the vars (block and task) each string is templated with, and each set_fact's expressions."""
    if isinstance(data, str):
        scopes.setdefault((path, data), scope)
    elif isinstance(data, list):
        for item in data:
            _walk_tasks(item, path, scope, scopes, facts)
    elif isinstance(data, dict):
        scope = {**scope, **(data.get("vars") if isinstance(data.get("vars"), dict) else {})}
        for key, value in data.items():
            if key in ("ansible.builtin.set_fact", "set_fact") and isinstance(value, dict):
                for name, expression in value.items():
                    facts.setdefault(name, []).append(expression)
            _walk_tasks(value, path, scope, scopes, facts)


def _context():
    base, scopes, facts = {}, {}, {}
    for pattern in ("roles/*/defaults/main.yml", "roles/*/vars/main.yml"):
        for path in sorted(ROOT.glob(pattern)):
            base.update(_load(path))
    for path in _task_files():
        if "/defaults/" in str(path) or "/vars/" in str(path) or "/meta/" in str(path):
            continue
        _walk_tasks(_load(path), path.relative_to(ROOT), {}, scopes, facts)
    # A fact set in one place only is a definition; one set in several places needs a stand-in.
    base.update({name: values[0] for name, values in facts.items() if len(values) == 1})
    return base, scopes


BASE, SCOPES = _context()


def _names(value, conditional=False):
    """The variables a condition, or a definition (a string, or strings inside a list or mapping), reads."""
    if isinstance(value, dict):
        return set().union(*(_names(item) for item in value.values()))
    if isinstance(value, list):
        return set().union(*(_names(item) for item in value))
    if not isinstance(value, str):
        return set()
    tree = bool_uses.Expression(Path("-"), 1, 1, value, conditional).parse()
    return {node.name for node in tree.find_all(nodes.Name) if node.ctx == "load"}


def _reads(names, scope, seen=None):
    """The variables an expression reads, through the definitions (defaults, vars, set_fact, task vars) it names."""
    seen = set() if seen is None else seen
    for name in names - seen:
        seen.add(name)
        if name not in STAND_INS:
            _reads(_names(scope.get(name, BASE.get(name))), scope, seen)
    return seen


def _cases():
    cases = []
    for expression in bool_uses.expressions(ROOT):
        scope = SCOPES.get((expression.path, expression.text), {})
        direct = _names(expression.text, expression.conditional)
        reads = _reads(direct, scope) if expression.conditional else direct
        for switch in sorted(NAMES & reads):
            cases.append(pytest.param(switch, expression, scope, id=f"{switch}@{expression.path}:{expression.line}"))
    return cases


CASES = _cases()


def _evaluate(expression, scope, switch, value):
    templar = template.Templar(loader=LOADER, variables={**BASE, **scope, **STAND_INS, switch: value})
    text = template.trust_as_template(expression.text)
    return templar.evaluate_conditional(text) if expression.conditional else templar.template(text)


def _evaluate_real(expression, scope, switch, value):
    try:
        return _evaluate(expression, scope, switch, value)
    except AnsibleUndefinedVariable as error:
        pytest.skip(f"{expression.path}:{expression.line}: no stand-in: {str(error).splitlines()[0]}")


# The switches the registry of concerns hands an applier (plugins/module_utils/concerns.py): typed on the controller
# by the module's own argument spec (plugins/plugin_utils/role_checks.py _typed), or derived there.
def _registry_switches():
    from ansible_collections.gpucluster.fabric.plugins.module_utils import concerns

    found = {}
    for concern in concerns.CONCERNS:
        for argument, source in concern.args.items():
            if isinstance(source, str) and source in NAMES:
                found[source] = (concern, argument)
    return found


REGISTRY = _registry_switches()
DERIVED_SWITCHES = {"gpucluster_site_preflight": "site_preflight"}


class _View:
    def __init__(self, variables):
        self.variables = variables

    def get(self, name, default=None):
        return self.variables.get(name, default)


def _registry_value(switch, value):
    from ansible_collections.gpucluster.fabric.plugins.plugin_utils import role_checks

    if switch in DERIVED_SWITCHES:
        return role_checks.DERIVED[DERIVED_SWITCHES[switch]](_View({switch: value}))
    concern, argument = REGISTRY[switch]
    return role_checks._typed(concern, {argument: value})[argument]


@pytest.mark.parametrize("switch", sorted(set(REGISTRY) | set(DERIVED_SWITCHES)))
def test_registry_switch_is_typed_like_the_boolean(switch):
    """A switch the registry hands an applier reaches it as the boolean each spelling means."""
    for spellings in (TRUE_SPELLINGS, FALSE_SPELLINGS):
        for spelling in spellings:
            assert _registry_value(switch, spelling) is spellings[-1], f"{switch}={spelling!r}"


def test_every_switch_has_a_case():
    switches = {case.values[0] for case in CASES} | set(REGISTRY) | set(DERIVED_SWITCHES)
    assert switches == NAMES
    assert len(REGISTRY) >= 10
    # A floor against a walk that finds nothing; switches passed to modules (type bool, converted by Ansible's
    # argument spec) are no conditional of ours, so the count falls as logic moves into Python.
    assert sum(1 for case in CASES if case.values[1].conditional) >= 3


@pytest.mark.parametrize(("switch", "expression", "scope"), CASES)
def test_string_evaluates_like_the_boolean(switch, expression, scope):
    for spellings in (TRUE_SPELLINGS, FALSE_SPELLINGS):
        expected = _evaluate_real(expression, scope, switch, spellings[-1])
        for spelling in spellings[:-1]:
            assert _evaluate(expression, scope, switch, spelling) == expected, f"{switch}={spelling!r}"


@pytest.mark.parametrize("switch", sorted(NAMES))
def test_switch_decides(switch):
    """With the stand-ins, true and false give different results somewhere: the cases above really test the switch."""
    results = [tuple(_registry_value(switch, value) for value in (True, False))] if switch in REGISTRY else []
    if switch in DERIVED_SWITCHES:
        results.append(tuple(_registry_value(switch, value) for value in (True, False)))
    for case in CASES:
        name, expression, scope = case.values
        if name == switch:
            try:
                results.append(tuple(_evaluate(expression, scope, switch, value) for value in (True, False)))
            except AnsibleUndefinedVariable:
                continue
    assert any(on != off for on, off in results), f"{switch}: no expression changes with it"


def test_bare_switch_would_be_caught():
    """The evaluation above tells a bare use from a filtered one: ansible-core refuses or misreads the string."""
    bare = bool_uses.Expression(Path("-"), 1, 1, "not nccl_hold", True)
    assert _evaluate(bare, {}, "nccl_hold", False) is True
    assert _evaluate(bare, {}, "nccl_hold", "false") is False  # "false" is a non-empty string: truthy
    with pytest.raises(AnsibleBrokenConditionalError, match="must have a boolean result"):
        _evaluate(bool_uses.Expression(Path("-"), 1, 1, "nccl_hold", True), {}, "nccl_hold", "false")
