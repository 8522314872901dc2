"""playbooks/preflight.yml checks every role site.yml applies, each in its own rescued block, in site.yml's order."""

from pathlib import Path

import yaml
from ansible_collections.gpucluster.fabric.plugins.filter.preflight import SITE_ROLES

ROOT = Path(__file__).resolve().parents[2]


def test_one_rescued_block_per_site_role_in_order():
    plays = yaml.safe_load((ROOT / "playbooks" / "preflight.yml").read_text())
    (checks,) = [
        task for play in plays for task in play.get("tasks", []) if task["name"] == "Run each role's input checks"
    ]
    roles = []
    for block in checks["block"]:
        (imported,) = block["block"]
        role = imported["ansible.builtin.import_role"]["name"].removeprefix("gpucluster.fabric.")
        assert imported["ansible.builtin.import_role"]["tasks_from"] == "preflight"
        assert block["when"] == f"'{role}' in __gpucluster_check_roles"
        (kept,) = block["rescue"]
        assert kept["vars"]["__gpucluster_problem"]["role"] == role
        roles.append(role)
    assert roles == list(SITE_ROLES)
    assert "always" not in checks  # cuda_repo's probe removes its own downloads


def test_site_imports_the_playbooks_of_every_role():
    text = "".join((ROOT / "playbooks" / name).read_text() for name in ("rdma.yml", "nccl.yml", "interfaces.yml"))
    text += "".join((ROOT / "playbooks" / name).read_text() for name in ("opensm.yml", "validate.yml"))
    for role in SITE_ROLES:
        assert f"role: gpucluster.fabric.{role}\n" in text and f"'{role}' in __gpucluster_roles" in text, role
