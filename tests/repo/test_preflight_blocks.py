"""playbooks/preflight.yml checks every role site.yml applies, each through one rescued include, in site.yml's order."""

from pathlib import Path

import yaml
from ansible_collections.gpucluster.fabric.plugins.filter.preflight import SITE_ROLES

ROOT = Path(__file__).resolve().parents[2]


def test_one_rescued_include_per_role_in_site_order():
    plays = yaml.safe_load((ROOT / "playbooks" / "preflight.yml").read_text())
    (checks,) = [
        task for play in plays for task in play.get("tasks", []) if task["name"] == "Run each role's input checks"
    ]
    assert checks["ansible.builtin.include_tasks"] == "tasks/role_checks.yml"
    assert checks["loop"].lstrip().startswith("{{ __gpucluster_preflight_roles")
    assert checks["loop_control"]["loop_var"] == "__gpucluster_check_role"
    assert "always" not in checks.get("tags", [])  # cuda_repo's probe removes its own downloads
    (block,) = yaml.safe_load((ROOT / "playbooks" / "tasks" / "role_checks.yml").read_text())
    (included,) = block["block"]
    assert included["ansible.builtin.include_role"] == {
        "name": "gpucluster.fabric.{{ __gpucluster_check_role }}",
        "tasks_from": "preflight",
    }
    (kept,) = block["rescue"]
    assert kept["vars"]["__gpucluster_problem"]["role"] == "{{ __gpucluster_check_role }}"
    # site_roles returns the roles in site.yml's order, the order the checks run in (cuda_repo before nccl)
    assert list(SITE_ROLES).index("cuda_repo") < list(SITE_ROLES).index("nccl")
    for role in SITE_ROLES:
        assert (ROOT / "roles" / role / "tasks" / "preflight.yml").is_file(), role


def test_site_imports_the_playbooks_of_every_role():
    text = "".join((ROOT / "playbooks" / name).read_text() for name in ("rdma.yml", "nccl.yml", "interfaces.yml"))
    text += "".join((ROOT / "playbooks" / name).read_text() for name in ("opensm.yml", "validate.yml"))
    for role in SITE_ROLES:
        assert f"name: gpucluster.fabric.{role}\n" in text and f"'{role}' in __gpucluster_roles" in text, role
