"""The parts of tests/bench/site_bench.py that decide what is measured: the generated inventory, which changes count
against the no-op re-run, and the baseline's command count."""

import os
import sys

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
import site_bench  # noqa: E402


def test_inventory_has_bench_nodes_lab_groups_and_lab_group_vars(tmp_path):
    inventory = site_bench.write_inventory(str(tmp_path / "inv"), 3)
    with open(os.path.join(inventory, "hosts.yml")) as f:
        tree = yaml.safe_load(f)["all"]
    with open(os.path.join(site_bench.LAB_INVENTORY, "hosts.yml")) as f:
        lab_groups = set(yaml.safe_load(f)["all"]["children"])
    assert set(tree["children"]) >= lab_groups | {"gpu_nodes"}
    assert list(tree["children"]["gpu_nodes"]["hosts"]) == ["bench-gpu-01", "bench-gpu-02", "bench-gpu-03"]
    others = [g for g in tree["children"] if g != "gpu_nodes"]
    assert all(not tree["children"][g].get("hosts") for g in others)
    assert os.path.realpath(os.path.join(inventory, "group_vars")) == os.path.realpath(
        os.path.join(site_bench.LAB_INVENTORY, "group_vars")
    )


def test_mitogen_connection_is_a_host_variable(tmp_path):
    inventory = site_bench.write_inventory(str(tmp_path / "inv"), 2, connection="podman")
    with open(os.path.join(inventory, "hosts.yml")) as f:
        hosts = yaml.safe_load(f)["all"]["children"]["gpu_nodes"]["hosts"]
    assert hosts == {"bench-gpu-01": {"ansible_connection": "podman"}, "bench-gpu-02": {"ansible_connection": "podman"}}


def test_changes_on_the_controller_are_told_apart_from_changes_on_nodes():
    delegated = {"ansible_connection": "local", "ansible_host": "localhost"}
    report = {
        "task": {"name": "Write the JSON report"},
        "hosts": {"n1": {"changed": True, "_ansible_delegated_vars": delegated}},
    }
    install = {"task": {"name": "Install packages"}, "hosts": {"n1": {"changed": True}, "n2": {"changed": False}}}
    result = {"plays": [{"tasks": [report, install]}]}
    assert site_bench.changed_tasks(result) == [
        ("n1", "Write the JSON report", True),
        ("n1", "Install packages", False),
    ]


def test_blog_script_command_count():
    # apt install, wget, dpkg -i, apt update && apt install, modprobe x2, ifconfig, ibv_rc_pingpong
    assert site_bench.blog_commands() == 9
