"""gpucluster.fabric.preflight in real ansible-playbook runs on localhost (connection local; it changes nothing).

The roles checked are limited with gpucluster_roles to rdma_core and nccl, whose checks read this machine only
(dpkg, apt-cache): the others probe hardware or download from NVIDIA's repository.
"""

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _playbook import COLLECTIONS, ansible_playbook, needs_playbook  # noqa: E402
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils import concerns, node_check  # noqa: E402

pytestmark = [needs_playbook, pytest.mark.playbook]

# A site playbook of a user's own: the collection's preflight, then the user's plays (here: a report of what it
# recorded, where the user would apply gpucluster.fabric.rdma_core and gpucluster.fabric.nccl).
USER_PLAYBOOK = """
- name: The collection's checks first
  ansible.builtin.import_playbook: gpucluster.fabric.preflight
- name: What the preflight recorded
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Show the roles checked
      ansible.builtin.debug:
        msg: "checked={{ __gpucluster_preflight.checked | join(',') }}"
"""


def _run(tmp_path, hosts, group_vars=None):
    inventory = tmp_path / "hosts.yml"
    lines = ["all:", "  vars:", "    ansible_connection: local", f"    ansible_python_interpreter: {sys.executable}"]
    lines += [f"    {name}: {value!r}" for name, value in (group_vars or {}).items()]
    lines += ["  children:", "    gpu_nodes:", "      hosts:"]
    for host, variables in hosts.items():
        lines.append(f"        {host}:" + ("" if variables else " {}"))
        lines += [f"          {name}: {value!r}" for name, value in variables.items()]
    inventory.write_text("\n".join(lines) + "\n")
    playbook = tmp_path / "site.yml"
    playbook.write_text(USER_PLAYBOOK)
    return ansible_playbook(tmp_path, inventory, playbook, timeout=300)


def test_rdma_core_and_nccl_only_pass_without_fabric_variables(tmp_path):
    good = {"nccl_version": "2.21.5", "nccl_cuda_version": "12.4"}
    run = _run(tmp_path, {"gpu01": good, "gpu02": good}, {"gpucluster_roles": ["rdma_core", "nccl"]})
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert out.count("checked=rdma_core,nccl") == 2, out


def test_five_mistakes_five_messages_one_run(tmp_path):
    good = {"nccl_version": "2.21.5", "nccl_cuda_version": "12.4"}
    hosts = {
        "gpu01": {**good, "nccl_versoin": "2.21.5", "rdma_core_memlock": "lots", "nccl_conf": {"NCCL_P2P_DISABLE": 1}},
        "gpu02": {**good, "nccl_hold": "maybe", "rdma_core_extra_packages": ["bad name!"]},
    }
    run = _run(tmp_path, hosts, {"gpucluster_roles": "rdma_core,nccl"})
    out = run.stdout + run.stderr
    assert run.returncode != 0, out
    expected = [
        "gpu01: nccl_versoin: did you mean nccl_version?",  # undeclared name
        "gpu01: rdma_core_memlock=lots is not a limit",  # rdma_core's checks
        "gpu01: nccl_conf: NCCL_P2P_DISABLE is a debug-only",  # nccl's checks: a debug-only variable
        "gpu02: gpucluster.fabric.nccl: argument 'nccl_hold' is of type",  # nccl's argument spec
        "gpu02: bad name! in rdma_core_extra_packages is not a valid package name",  # other host
    ]
    report = out.split("TASK [Check the inventory and the hosts before any change]")[1]
    for message in expected:
        assert message in report, (message, report)
    assert "gpu01: 3 problems in the inventory" in report and "gpu02: 2 problems in the inventory" in report
    assert "checked=" not in out  # the user's plays never ran


INTENT_PLAYBOOK = """
- name: The collection's checks first
  ansible.builtin.import_playbook: gpucluster.fabric.preflight
- name: The intent it computed
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Show the intent
      ansible.builtin.debug:
        msg: "INTENT={{ ansible_facts.gpucluster_fabric_intent | to_json }}"
- name: Apply as site.yml's plays do (in check mode), from the intent
  hosts: gpu_nodes
  gather_facts: false
  vars_files: [STEPS]
  tasks:
    - name: Apply rdma_core
      gpucluster.fabric.apply:
        roles: [rdma_core]
      check_mode: true
      register: applied
    - name: Show where its arguments came from
      ansible.builtin.debug:
        msg: "MADE_FROM={{ applied.made_from }} FAILED={{ applied.results.rdma_core.failed | default(false) }}"
"""


def test_the_intent_is_each_appliers_arguments_defaulted(tmp_path):
    """Every check passed: the host's intent is one fact, for each role its applier's arguments as the registry of
    concerns makes them (role defaults filled in, the inventory's values over them), less what steers one run; a
    later play's module apply takes them from it (made_from) and does not check the host again."""
    good = {"nccl_version": "2.21.5", "nccl_cuda_version": "12.4", "nccl_conf": {"NCCL_SOCKET_IFNAME": "=ib0"}}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  vars:\n    ansible_connection: local\n"
        f"    ansible_python_interpreter: {sys.executable}\n"
        "    gpucluster_roles: [rdma_core, nccl]\n    rdma_core_memlock: 1048576\n"
        f"  children:\n    gpu_nodes:\n      hosts:\n        gpu01: {good!r}\n"
    )
    playbook = tmp_path / "intent.yml"
    steps = Path(COLLECTIONS) / "ansible_collections" / "gpucluster" / "fabric" / "playbooks" / "vars" / "steps.yml"
    playbook.write_text(INTENT_PLAYBOOK.replace("STEPS", str(steps)))
    run = ansible_playbook(tmp_path, inventory, playbook, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    # A later play's apply takes the role's part from the intent the preflight made (not made again).
    assert "MADE_FROM={'rdma_core': 'intent'} FAILED=False" in out, out
    line = next(line for line in out.splitlines() if '"msg": "INTENT=' in line)
    document = json.loads(json.loads("{" + line.strip() + "}")["msg"][len("INTENT=") :])
    assert document["schema"] == 1 and document["host"] == "gpu01"
    assert set(document["roles"]) == {"rdma_core", "nccl"}
    nccl = document["roles"]["nccl"]
    assert nccl["nccl_version"] == "2.21.5" and nccl["conf"] == {"NCCL_SOCKET_IFNAME": "=ib0"}
    assert nccl["conf_path"] == "/etc/nccl.conf"  # the role's default
    assert nccl["required_features"] == [] and nccl["feature_minimums"][0]["feature"] == "dmabuf"  # role vars
    assert {"state", "host", "offered_index"}.isdisjoint(nccl)
    assert nccl["header"].startswith("#")  # part of each file's content, which the node check compares
    assert document["roles"]["rdma_core"]["memlock"] == "1048576"
    # The node check gives each applier these arguments as the module's own validator would.
    for role in ("rdma_core", "nccl"):
        spec = concerns.appliers()[f"gpucluster.fabric.{role}"][0]
        args = dict(document["roles"][role], state="present")
        assert node_check.params_for(spec, args) == ArgumentSpecValidator(spec).validate(args).validated_parameters


def test_node_check_values_are_refused_with_the_variable_and_the_fix(tmp_path):
    bad = {"node_check_interval": 0, "node_check_skip": ["port.stat", "drift.nccl"], "node_check_only": "drift.*"}
    run = _run(tmp_path, {"gpu01": bad}, {"gpucluster_roles": ["node_check"]})
    out = run.stdout + run.stderr
    assert run.returncode != 0, out
    assert "gpu01: node_check_interval=0 is not a number of seconds from 10 to 86400" in out, out
    assert "gpu01: node_check_skip: 'port.stat' names no check of the node check" in out, out
    # A string is a list of one, as the module's argument spec reads it; a pattern that names checks passes.
    assert "drift.nccl' names" not in out and "node_check_only" not in out, out


def test_firmware_settings_are_refused_by_mstflints_database_before_any_host_is_read(tmp_path):
    bad = {
        "hca_firmware_settings": {"ATS_ENABLE": True, "PCI_WR_ORDERING": "relaxed", "LINK_TYPE": "ETH"},
        "hca_firmware_devices": ["17:00"],
    }
    run = _run(tmp_path, {"gpu01": bad}, {"gpucluster_roles": ["hca_firmware"]})
    out = run.stdout + run.stderr
    assert run.returncode != 0, out
    assert "gpu01: hca_firmware_settings: ATS_ENABLE is not a parameter mstconfig knows" in out, out
    assert "gpu01: hca_firmware_settings.PCI_WR_ORDERING: 'relaxed' is not one of its values force_relax" in out, out
    assert "gpu01: hca_firmware_settings: LINK_TYPE is set per port: name it LINK_TYPE_P1" in out, out
    assert "gpu01: hca_firmware_devices: '17:00' is not a PCI address" in out, out


def test_firmware_settings_on_a_host_without_an_adapter_are_refused(tmp_path, monkeypatch):
    """The host is read (module hca_firmware, state checked) once mstconfig is there: a stand-in here, found on the
    PATH as the module looks for it; this machine has no NVIDIA adapter on its PCI bus."""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "mstconfig").write_text("#!/bin/sh\necho '-E- Failed to open the device'; exit 3\n")
    (tools / "mstconfig").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    run = _run(
        tmp_path, {"gpu01": {"hca_firmware_settings": {"ATS_ENABLED": True}}}, {"gpucluster_roles": ["hca_firmware"]}
    )
    out = run.stdout + run.stderr
    assert run.returncode != 0, out
    assert "gpu01: hca_firmware_settings names settings, but the host has no NVIDIA network adapter" in out, out


def test_acs_clearing_on_a_host_without_gpudirect_is_refused(tmp_path):
    """This machine has no GPU: GPUDirect RDMA is decided off, and clearing ACS for it is refused in the preflight."""
    run = _run(tmp_path, {"gpu01": {"rdma_modules_acs_clear": True}}, {"gpucluster_roles": ["rdma_modules"]})
    out = run.stdout + run.stderr
    assert run.returncode != 0, out
    assert "gpu01: rdma_modules_acs_clear is set, but GPUDirect RDMA is off on this host (mode none)" in out, out
