"""playbooks/preflight.yml checks every role site.yml applies in one task per host, in site.yml's order."""

from pathlib import Path

import pytest
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


@pytest.mark.parametrize(
    ("role", "tasks_file", "module"),
    [
        ("rdma_core", "apply.yml", "gpucluster.fabric.rdma_core"),
        ("rdma_modules", "apply.yml", "gpucluster.fabric.rdma_modules"),
        ("nccl", "apply.yml", "gpucluster.fabric.nccl"),
        ("cuda_repo", "main.yml", "gpucluster.fabric.cuda_repo"),
    ],
)
def test_the_checks_use_the_roles_own_task_arguments(role, tasks_file, module):
    """The checks read each applier's arguments from the role's task file (role_checks.RoleVars.task_args): the
    task exists, and a state variable the check sets is what the task reads."""
    (task,) = [t for t in yaml.safe_load((ROOT / "roles" / role / "tasks" / tasks_file).read_text()) if module in t]
    args = task[module]
    if role != "cuda_repo":
        assert args["state"] == f"{{{{ __{role}_state | default('present') }}}}", role
    else:  # the probe takes the applier's arguments but the applier-only ones
        probe = yaml.safe_load((ROOT / "plugins" / "modules" / "cuda_repo_probe.py").read_text().split('"""')[1])
        options = set(probe["options"])
        assert set(args) - {"run_tags", "skip_tags", "host", "header"} <= options


def test_the_roles_checks_run_through_the_same_plugin():
    """A role in a play of one's own runs its checks with the site preflight's code: its first task, or its applier
    with role_checks (action plugins/plugin_utils/role_checks.py CheckedApplierAction), unless the preflight did."""
    tasks = yaml.safe_load((ROOT / "roles" / "opensm" / "tasks" / "main.yml").read_text())
    assert tasks[0]["gpucluster.fabric.preflight"] == {"roles": ["opensm"], "argument_specs": False}
    for role, tasks_file, module in (
        ("fabric_interfaces", "main.yml", "fabric_interfaces"),
        ("roce_qos", "main.yml", "roce_qos"),
        ("fabric_validate", "collect.yml", "fabric_validate_collect"),
    ):
        (task, *_) = yaml.safe_load((ROOT / "roles" / role / "tasks" / tasks_file).read_text())
        args = task[f"gpucluster.fabric.{module}"]
        assert args["role_checks"] == f"{{{{ '{role}' not in __gpucluster_checked | default([]) }}}}", role
        assert "when" not in task, role  # a host without anything to apply is still checked
        action = (ROOT / "plugins" / "action" / f"{module}.py").read_text()
        assert f'ROLE = "{role}"' in action and "CheckedApplierAction" in action
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
    """`--tags <role>_<step>` selects the task of module gpucluster.fabric.apply that applies the role, as it selected
    the role's own applier task: the task's tags are those of its roles' applier tasks, neither more nor fewer."""
    seen = 0
    for name in ("rdma.yml", "nccl.yml", "interfaces.yml"):
        for play in yaml.safe_load((ROOT / "playbooks" / name).read_text()):
            for task in play.get("tasks") or []:
                if "gpucluster.fabric.apply" not in task:
                    continue
                seen += 1
                roles = [r for r in concerns.applied_together() if f"'{r}'" in task["gpucluster.fabric.apply"]["roles"]]
                expected = set()
                for role in roles:
                    concern = concerns.get(role)
                    for entry in yaml.safe_load((ROOT / "roles" / role / "tasks" / concern.task).read_text()):
                        if concern.module in entry:
                            expected |= set(entry.get("tags") or [])
                assert roles and set(task.get("tags") or []) == expected, (name, roles)
    assert seen >= 2
