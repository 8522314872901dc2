"""The declared_vars check in real ansible-playbook runs on localhost (connection local; nothing is changed)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _playbook import ansible_playbook, needs_playbook  # noqa: E402

pytestmark = [needs_playbook, pytest.mark.playbook]

# A play before the check registers and sets names with the collection's prefixes, and the check runs inside a role
# whose defaults and the play's vars carry such names too: none of them is the inventory's, none may be judged.
CHECK = """
- name: An earlier play of the run
  hosts: all
  gather_facts: false
  tasks:
    - name: Register a result
      ansible.builtin.command: "true"
      register: nccl_user_result
      changed_when: false
    - name: Set a fact
      ansible.builtin.set_fact:
        fabric_user_fact: 1
- name: The check
  hosts: all
  gather_facts: false
  vars:
    opensm_play_level_name: 1
  roles:
    - checker
"""


def _run(tmp_path, hosts, *args, playbook=None):
    inventory = tmp_path / "hosts.yml"
    lines = ["all:", "  vars:", "    ansible_connection: local", f"    ansible_python_interpreter: {sys.executable}"]
    lines += ["  children:", "    gpu_nodes:", "      hosts:"]
    for host, variables in hosts.items():
        lines.append(f"        {host}:" + ("" if variables else " {}"))
        lines += [f"          {name}: {value!r}" for name, value in variables.items()]
    inventory.write_text("\n".join(lines) + "\n")
    if playbook is None:
        (tmp_path / "roles" / "checker" / "defaults").mkdir(parents=True, exist_ok=True)
        (tmp_path / "roles" / "checker" / "tasks").mkdir(exist_ok=True)
        (tmp_path / "roles" / "checker" / "defaults" / "main.yml").write_text("nccl_role_default_name: 1\n")
        (tmp_path / "roles" / "checker" / "tasks" / "main.yml").write_text(
            "- name: Check\n"
            "  gpucluster.fabric.declared_vars:\n"
            "    mode: \"{{ gpucluster_unknown_vars | default('error') }}\"\n"
        )
        playbook = tmp_path / "check.yml"
        playbook.write_text(CHECK)
    return ansible_playbook(tmp_path, inventory, playbook, *args, roles_path=tmp_path / "roles")


def test_clean_inventory_passes(tmp_path):
    run = _run(tmp_path, {"gpu01": {"nccl_version": "2.21.5"}, "gpu02": {"fabric_port_guids": ["0x1"]}})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "did you mean" not in run.stdout


def test_every_mistake_of_every_host_in_one_run(tmp_path):
    run = _run(tmp_path, {"gpu01": {"nccl_versoin": "2.21.5"}, "gpu02": {"opensm_sm_priorty": 3}}, "-e", "rdma_zzz=1")
    out = run.stdout + run.stderr
    assert run.returncode != 0, out
    assert "gpu01: nccl_versoin: did you mean nccl_version?" in out
    assert "gpu02: opensm_sm_priorty: did you mean opensm_sm_priority?" in out
    # -e extra vars are the inventory's too
    assert "gpu01: rdma_zzz: no role of gpucluster.fabric declares it" in out
    assert "gpu02: rdma_zzz" in out
    for name in ("nccl_user_result", "fabric_user_fact", "opensm_play_level_name", "nccl_role_default_name"):
        assert name not in out


def test_warn_reports_and_goes_on(tmp_path):
    run = _run(tmp_path, {"gpu01": {"nccl_versoin": "2.21.5", "gpucluster_unknown_vars": "warn"}})
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "gpu01: nccl_versoin: did you mean nccl_version?" in out


def test_ignore_skips(tmp_path):
    run = _run(tmp_path, {"gpu01": {"nccl_versoin": "2.21.5"}}, "-e", "gpucluster_unknown_vars=ignore")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "did you mean" not in run.stdout


def test_site_preflight_reports_misspelled_names_with_every_other_problem(tmp_path):
    """gpucluster.fabric.preflight (site.yml's first playbook) reports the misspelled names of every host, and does
    not stop there: the roles' argument specs and checks run too, and everything is reported by its last task."""
    run = _run(
        tmp_path,
        {"gpu01": {"nccl_versoin": "2.21.5"}, "gpu02": {"fabric_interfaces_bakend": "netplan"}},
        "-e",
        "gpucluster_roles=rdma_core,nccl",
        playbook="gpucluster.fabric.preflight",
    )
    out = run.stdout + run.stderr
    assert run.returncode != 0, out
    assert "gpu01: nccl_versoin: did you mean nccl_version?" in out
    assert "gpu02: fabric_interfaces_bakend: did you mean fabric_interfaces_backend?" in out
    # Neither host sets nccl_version: the nccl role's argument spec says so, with the way out.
    for host in ("gpu01", "gpu02"):
        assert f"{host}: gpucluster.fabric.nccl: missing required arguments: nccl_cuda_version, nccl_version" in out
    assert "leave nccl out of gpucluster_roles" in out
    assert "TASK [Check the inventory and the hosts before any change]" in out


def test_site_preflight_checks_each_role_spec_in_the_same_task(tmp_path):
    """The argument specs are checked by the preflight task itself: a value of the wrong type
    fails its role's spec, a value that cannot be templated fails its own role's check only, and both are reported
    with the host, the role and the variable."""
    run = _run(
        tmp_path,
        {"gpu01": {"rdma_core_install_perftest": "maybe", "fabric_validate_tiers": "{{ nowhere_defined }}"}},
        "-e",
        "gpucluster_roles=rdma_core,rdma_modules,fabric_validate",
        playbook="gpucluster.fabric.preflight",
    )
    out = run.stdout + run.stderr
    assert run.returncode != 0, out
    assert "gpu01: gpucluster.fabric.rdma_core: argument 'rdma_core_install_perftest' is of type" in out
    assert "gpu01: gpucluster.fabric.fabric_validate: fabric_validate_tiers: 'nowhere_defined' is undefined" in out
    assert "gpucluster.fabric.rdma_modules" not in out.split("problems in the inventory")[-1]
    # one task for the names, the specs and the checks, and no role check of the two refused roles ran
    assert out.count("TASK [") == 1, out  # the preflight alone (it gathers the minimal facts itself)
    assert '"checks_run": ["rdma_modules"]' in out, out
