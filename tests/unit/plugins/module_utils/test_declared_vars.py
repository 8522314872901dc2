import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from _load import ROOT, load  # noqa: E402

# Controller-side code (it reads YAML), so it lives in plugin_utils, not module_utils.
declared_vars = load("declared_vars", kind="plugin_utils")
DECLARED = declared_vars.declared_names(ROOT)


@pytest.mark.parametrize(
    "name",
    [
        "nccl_version",  # argument spec and defaults
        "opensm_sm_priority",
        "gpucluster_batch",  # a playbook switch
        "gpucluster_unknown_vars",  # this check's own switch
        "gpucluster_fabric_interfaces",  # a published fact
        "gpucluster_gpudirect",
        "opensm_restart_required",
        "fabric_port_guids",  # inventory contract of the lab and the example inventory
    ],
)
def test_declared(name):
    assert name in DECLARED


def test_private_names_are_not_declared():
    assert not [name for name in DECLARED if name.startswith("_")]


def test_misspelled_name_gets_the_closest_declared_name():
    assert declared_vars.undeclared_messages("gpu01", ["nccl_versoin"], DECLARED) == [
        "gpu01: nccl_versoin: did you mean nccl_version?"
    ]


def test_unknown_name_gets_no_suggestion():
    (message,) = declared_vars.undeclared_messages("gpu01", ["rdma_zzzzzz_qqqq"], DECLARED)
    assert message == "gpu01: rdma_zzzzzz_qqqq: no role of gpucluster.fabric declares it"


def test_declared_and_foreign_names_pass():
    names = sorted(DECLARED) + ["ansible_host", "lab_mirror", "site_rdma_setting", "nccl", "fabric"]
    assert declared_vars.undeclared_messages("gpu01", names, DECLARED) == []


def test_every_mistake_is_reported():
    names = ["nccl_versoin", "opensm_sm_priorty", "cuda_repo_distor", "gpucluster_bach", "fabric_zzz"]
    messages = declared_vars.undeclared_messages("gpu01", names, DECLARED)
    assert len(messages) == 5
    assert all(message.startswith("gpu01: ") for message in messages)
    assert "gpu01: opensm_sm_priorty: did you mean opensm_sm_priority?" in messages
    assert "gpu01: gpucluster_bach: did you mean gpucluster_batch?" in messages
    failure = declared_vars.failure_message(messages)
    assert "gpucluster_unknown_vars=warn" in failure and all(message in failure for message in messages)


def test_declared_set_is_read_from_a_collection(tmp_path):
    (tmp_path / "roles" / "demo" / "meta").mkdir(parents=True)
    (tmp_path / "roles" / "demo" / "defaults").mkdir()
    (tmp_path / "roles" / "demo" / "tasks").mkdir()
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "roles" / "demo" / "meta" / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    options:\n      nccl_demo_spec: {type: str}\n"
    )
    (tmp_path / "roles" / "demo" / "defaults" / "main.yml").write_text("nccl_demo_default: 1\n")
    (tmp_path / "roles" / "demo" / "tasks" / "main.yml").write_text(
        "- {ansible.builtin.command: 'true', register: nccl_demo_unpublished}\n"  # a task file is not read
    )
    (tmp_path / "playbooks" / "site.yml").write_text(
        "- hosts: \"{{ gpucluster_demo_hosts | default('all') }}\"\n  vars: {gpucluster_demo_play: 1}\n  tasks:\n"
        "    - block:\n"
        "        - ansible.builtin.set_fact: {nccl_demo_fact: 1, __nccl_demo_private: 2, cacheable: true}\n"
        "      rescue:\n"
        "        - {ansible.builtin.command: 'true', register: nccl_demo_result}\n"
    )
    assert declared_vars.declared_names(tmp_path, published=["nccl_demo_published"]) == {
        "nccl_demo_published",
        "nccl_demo_spec",
        "nccl_demo_default",
        "nccl_demo_fact",
        "nccl_demo_result",
        "gpucluster_demo_hosts",
        "gpucluster_demo_play",
        "fabric_port_guids",
    }


def _inventory_names(node):
    """Variable names of a YAML inventory file (hosts.yml) or a group_vars/host_vars file."""
    names = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "vars" and isinstance(value, dict):
                names |= set(value)
            elif key in ("hosts", "children") and isinstance(value, dict):
                for child in value.values():
                    names |= _inventory_names(child)
            elif isinstance(value, dict) and ("hosts" in value or "children" in value or "vars" in value):
                names |= _inventory_names(value)
    return names


def _var_files():
    for inventory in ("inventories/example", "inventories/lab", "molecule/site"):
        base = ROOT / inventory
        for path in sorted(base.glob("group_vars/**/*.yml")) + sorted(base.glob("host_vars/**/*.yml")):
            yield path, set(yaml.safe_load(path.read_text()) or {}) if "vault" not in path.name else set()
        for path in sorted(base.glob("hosts.yml")):
            yield path, _inventory_names(yaml.safe_load(path.read_text()))


def _id(value):
    return str(value.relative_to(ROOT)) if isinstance(value, Path) else "names"


@pytest.mark.parametrize("path,names", list(_var_files()), ids=_id)
def test_repo_inventories_use_declared_names_only(path, names):
    assert declared_vars.undeclared(names, DECLARED) == [], path
