"""gpucluster.fabric.apply, the orchestration site.yml's plays call, in real ansible-playbook runs on localhost
(connection local, check mode: it changes nothing). The roles are fabric_interfaces and roce_qos as
playbooks/interfaces.yml calls them, on a host that declares no interface: each role's own rule
(nothing_to_apply) leaves its applier nothing to do, so nothing is run on this machine but the checks.

What the lab runs end to end (the site scenario) is not repeated here: the selection by tags (Ansible's own rule),
the checks of a host the site preflight did not check, and the result's shape.
"""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _playbook import ansible_playbook, needs_playbook  # noqa: E402

pytestmark = [needs_playbook, pytest.mark.playbook]

# interfaces.yml's task, as a user's play would hold it; the step tags are fabric_interfaces' (concerns.py).
PLAYBOOK = """
- name: Apply two concerns in one call
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Apply fabric_interfaces and roce_qos
      gpucluster.fabric.apply:
        roles: {roles}
      register: gpucluster_applied
      tags: [fabric_interfaces_preflight, fabric_interfaces_configure, fabric_interfaces_sysctl,
             fabric_interfaces_run, fabric_interfaces_softroce]
    - name: Say what it did
      ansible.builtin.debug:
        msg: "APPLIED {{{{ {{'ran': gpucluster_applied is defined,
          'results': (gpucluster_applied | default({{}})).results | default({{}}) | list | sort,
          'made_from': (gpucluster_applied | default({{}})).made_from | default({{}}),
          'changed': (gpucluster_applied | default({{}})).changed | default(false)}} | to_json }}}}"
      tags: [always]
"""


def _run(tmp_path, host_vars, *args, roles="[fabric_interfaces, roce_qos]"):
    inventory = tmp_path / "hosts.yml"
    lines = ["all:", "  vars:", "    ansible_connection: local", f"    ansible_python_interpreter: {sys.executable}"]
    lines += ["  children:", "    gpu_nodes:", "      hosts:", "        gpu01:"]
    lines += [f"          {name}: {json.dumps(value)}" for name, value in host_vars.items()]
    inventory.write_text("\n".join(lines) + "\n")
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK.format(roles=roles))
    run = ansible_playbook(tmp_path, inventory, playbook, "--check", *args, timeout=300)
    out = run.stdout + run.stderr
    said = [line.split('"msg": "APPLIED ', 1)[1] for line in out.splitlines() if '"msg": "APPLIED ' in line]
    return run.returncode, out, json.loads(json.loads(f'"{said[0].rstrip()}')) if said else None


NO_INTERFACES = {"fabric_interfaces": []}


@pytest.mark.parametrize(
    ("args", "results"),
    [
        ((), ["fabric_interfaces", "roce_qos"]),
        # A step tag selects its concern alone: roce_qos's part of the task carries none of its own.
        (("--tags", "fabric_interfaces_configure"), ["fabric_interfaces"]),
        # Ansible skips a task that carries any tag --skip-tags names: skipping one of fabric_interfaces' steps
        # skips the whole call, roce_qos with it (roles/fabric_interfaces/README.md says so, and how to leave out
        # one step: --tags with the others).
        (("--skip-tags", "fabric_interfaces_sysctl"), []),
    ],
    ids=["untagged", "one-step-tag", "skip-a-step"],
)
def test_the_runs_tags_select_each_concern_as_ansible_selects_a_task(tmp_path, args, results):
    rc, out, applied = _run(tmp_path, NO_INTERFACES, *args)
    assert rc == 0, out
    assert applied["ran"] is bool(results), out
    assert applied["results"] == results, out
    # Not checked by the site preflight: each concern's arguments were made from its variables, once, and nothing
    # was changed (nothing_to_apply: no interface).
    assert applied["made_from"] == dict.fromkeys(results, "variables"), out
    assert applied["changed"] is False, out


def test_a_host_the_preflight_did_not_check_is_checked_first_and_changes_nothing(tmp_path):
    bad = {"fabric_interfaces": [{"name": "ib0", "kind": "ipoib", "mode": "datagram", "mtu": 9000}]}
    rc, out, applied = _run(tmp_path, bad)
    assert rc != 0, out
    assert "gpu01:" in out and "4092" in out and "fabric_interfaces" in out, out
    # The failed task's result (printed whole) carries the facts it gathered: the distribution's, not the login's
    # environment.
    assert '"os_family": "Debian"' in out and '"env": {' not in out and "PATH" not in out, out
    assert applied is None and "changed=0" in out, out  # the play stopped there, having changed nothing


def test_an_unknown_role_is_refused_naming_those_it_applies(tmp_path):
    rc, out, _applied = _run(tmp_path, NO_INTERFACES, roles="[fabric_interfaces, roce_qoss]")
    assert rc != 0, out
    assert "apply: unknown roles roce_qoss; it applies rdma_core, rdma_modules, hca_firmware" in out, out
