"""playbooks/preflight.yml checks every role site.yml applies in one task per host, in site.yml's order."""

from pathlib import Path

import yaml
from ansible_collections.gpucluster.fabric.plugins.module_utils import concerns
from ansible_collections.gpucluster.fabric.plugins.module_utils.concerns import roles
from ansible_collections.gpucluster.fabric.plugins.plugin_utils import role_checks

ROOT = Path(__file__).resolve().parents[2]


def test_one_task_checks_every_role_in_site_order():
    plays = yaml.safe_load((ROOT / "playbooks" / "preflight.yml").read_text())
    # One play, one task: the action gathers the minimal facts itself. A failed host stops every host; an unreachable
    # one is left out (max_fail_percentage counts failed hosts only; any_errors_fatal would count it too).
    assert len(plays) == 1 and plays[0]["gather_facts"] is False and plays[0]["max_fail_percentage"] == 0
    tasks = [task for play in plays for task in play.get("tasks", [])]
    assert [next(key for key in task if "." in key) for task in tasks] == ["gpucluster.fabric.preflight"]
    check = tasks[0]
    assert check["gpucluster.fabric.preflight"]["roles"] == "{{ __gpucluster_preflight_roles }}"
    assert check["register"] == "__gpucluster_preflight" and "any_errors_fatal" not in check
    assert check["tags"] == ["always"]  # the later plays rely on its facts and skip the checks it passed
    # The checks run in site.yml's order: cuda_repo's offered NCCL builds are read by nccl's.
    assert list(roles()).index("cuda_repo") < list(roles()).index("nccl")


def test_every_role_has_its_check():
    for role in roles():
        checks = role_checks.Checks
        own = callable(getattr(checks, f"_check_{role}", None))
        on_host = callable(getattr(checks, f"_step_{role}", None)) and callable(getattr(checks, f"_judge_{role}", None))
        assert own != on_host, role  # checked on the controller, or through the host call: one or the other


def _role_tasks(role):
    for path in sorted((ROOT / "roles" / role / "tasks").glob("*.yml")):
        for task in yaml.safe_load(path.read_text()) or []:
            yield path.name, task


def test_each_role_applies_its_concern_through_module_apply_alone():
    """A role's applier task is module gpucluster.fabric.apply with its role alone: the arguments are the registry's
    (made from the role's variables in Python, as site.yml's calls and the intent make them), the tags the
    registry's, and the checks module apply's (where the site preflight did not pass the host). No role task gives
    its applier module the intent's arguments itself."""
    for concern in concerns.CONCERNS:
        if not concern.module:
            continue
        applies = [(name, task) for name, task in _role_tasks(concern.role) if "gpucluster.fabric.apply" in task]
        assert len(applies) == 1, concern.role
        _name, task = applies[0]
        assert task["gpucluster.fabric.apply"] == {"role": concern.role}, concern.role
        assert set(task.get("tags") or []) == set(concern.tags), concern.role
        assert "when" not in task, concern.role  # a host without anything to apply is still checked
        for _name, other in _role_tasks(concern.role):
            # nccl's install.yml asks its module other things (the pin to restore, the library): never the intent.
            given = set(other.get(concern.module) or {}) - {"host", "header", "nccl_version", "cuda_version"}
            assert not given & set(concern.args) - {"package_revision"}, (concern.role, sorted(given))


def test_the_registry_reads_only_declared_variables_and_known_arguments():
    """Each argument the registry names is an option of its module's argument spec, and each variable it reads is one
    the role declares (meta/argument_specs.yml) or sets (vars/main.yml), or another role's declared variable: a
    renamed argument or variable fails here, not as a silent default."""
    declared = {}
    for role in roles():
        specs = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
        own = set(specs["argument_specs"]["main"].get("options") or {})
        vars_file = ROOT / "roles" / role / "vars" / "main.yml"
        own |= set(yaml.safe_load(vars_file.read_text()) or {}) if vars_file.is_file() else set()
        declared[role] = own
    everyone = set().union(*declared.values())
    seen = 0
    for concern in concerns.CONCERNS:
        if not concern.module:
            continue
        spec = getattr(role_checks.concern_code(concern), concern.spec)
        assert set(concern.args) <= set(spec), (concern.role, sorted(set(concern.args) - set(spec)))
        for source in concern.args.values():
            for name in source if isinstance(source, list) else [source]:
                seen += 1
                if not isinstance(name, str):
                    continue
                if name.startswith("@template:"):
                    name = name.split(":", 1)[1]
                    if not name.startswith("__"):
                        assert (ROOT / "roles" / concern.role / "templates" / name).is_file(), name
                        continue
                if name.startswith("@"):
                    assert name[1:] in role_checks.DERIVED, name
                    continue
                assert name in declared[concern.role] or (not name.startswith("__") and name in everyone), name
    assert seen > 80


def test_the_roles_checks_run_through_the_same_plugin():
    """A role in a play of one's own runs its checks with the site preflight's code: module apply (above), or the
    fabric_validate read with role_checks (its action plugin runs role_checks.Checks), unless
    the preflight did."""
    (task, *_) = yaml.safe_load((ROOT / "roles" / "fabric_validate" / "tasks" / "collect.yml").read_text())
    args = task["gpucluster.fabric.fabric_validate_collect"]
    assert args["role_checks"] == "{{ 'fabric_validate' not in __gpucluster_checked | default([]) }}"
    action = (ROOT / "plugins" / "action" / "fabric_validate_collect.py").read_text()
    assert 'ROLE = "fabric_validate"' in action and "self._checks(task_vars).run(ROLE)" in action
    for role in roles():
        assert not (ROOT / "roles" / role / "tasks" / "preflight.yml").exists(), role


def test_site_imports_the_playbooks_of_every_role():
    """Every role is applied by one of the step playbooks, only where gpucluster_roles selects it: imported, or by
    module gpucluster.fabric.apply."""
    names = ("rdma.yml", "nccl.yml", "interfaces.yml", "opensm.yml", "validate.yml")
    text = "".join((ROOT / "playbooks" / name).read_text() for name in names)
    applied = [
        task["gpucluster.fabric.apply"]["roles"]
        for name in names
        for play in yaml.safe_load((ROOT / "playbooks" / name).read_text())
        for task in play.get("tasks") or []
        if "gpucluster.fabric.apply" in task
    ]
    intent = (ROOT / "playbooks" / "intent.yml").read_text()
    for role in roles():
        if role == "node_check":  # installed with the intent, from its settings there, in the same call
            module = (ROOT / "plugins" / "modules" / "fabric_intent.py").read_text()
            assert "gpucluster.fabric.fabric_intent:" in intent and "node_check_install.install(" in module
            continue
        imported = f"name: gpucluster.fabric.{role}\n" in text and f"'{role}' in __gpucluster_roles" in text
        by_apply = any(f"'{role}'" in roles and "select('in', __gpucluster_roles)" in roles for roles in applied)
        assert imported or by_apply, role


def test_an_apply_task_carries_the_tags_of_its_roles_appliers():
    """`--tags <role>_<step>` selects the task of module gpucluster.fabric.apply that applies the role, as it selects
    the role's own applier task: the task's tags are its roles' (the registry's), neither more nor fewer."""
    seen = 0
    for name in ("rdma.yml", "nccl.yml", "interfaces.yml"):
        for play in yaml.safe_load((ROOT / "playbooks" / name).read_text()):
            for task in play.get("tasks") or []:
                if "gpucluster.fabric.apply" not in task:
                    continue
                seen += 1
                roles = [r for r in concerns.applied_together() if f"'{r}'" in task["gpucluster.fabric.apply"]["roles"]]
                expected = {tag for role in roles for tag in concerns.get(role).tags}
                assert roles and set(task.get("tags") or []) == expected, (name, roles)
    assert seen >= 2
