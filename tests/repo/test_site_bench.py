"""The parts of tests/bench/site_bench.py that decide what is measured: the generated inventory, which changes count
against the no-op re-run, and the baseline's command count."""

import ipaddress
import os
import re
import sys

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
import site_bench  # noqa: E402


def test_inventory_is_the_lab_shape_with_bench_nodes_and_lab_group_vars(tmp_path):
    inventory = site_bench.write_inventory(str(tmp_path / "inv"), 3)
    with open(os.path.join(inventory, "hosts.yml")) as f:
        tree = yaml.safe_load(f)["all"]
    with open(os.path.join(site_bench.LAB_INVENTORY, "hosts.yml")) as f:
        lab_groups = set(yaml.safe_load(f)["all"]["children"])
    assert set(tree["children"]) == lab_groups
    gpus = tree["children"]["gpu_nodes"]["hosts"]
    sms = tree["children"]["subnet_managers"]["hosts"]
    assert list(gpus) == ["bench-gpu-01", "bench-gpu-02", "bench-gpu-03"]
    assert list(sms) == ["bench-sm-01"]
    hosts = {**gpus, **sms}
    guids = [guid for values in hosts.values() for guid in values["fabric_port_guids"]]
    assert len(set(guids)) == 4 and all(re.fullmatch(r"0x[0-9a-f]{16}", guid) for guid in guids), guids
    addresses = [values["lab_fabric_address"] for values in gpus.values()]
    assert len(set(addresses)) == 3 and all(ipaddress.ip_interface(a).network.prefixlen == 24 for a in addresses)
    assert {values["lab_fabric_network"] for values in hosts.values()} == {"gpucluster-bench-fabric"}
    assert os.path.realpath(os.path.join(inventory, "group_vars")) == os.path.realpath(
        os.path.join(site_bench.LAB_INVENTORY, "group_vars")
    )


def test_thirty_two_nodes_get_distinct_guids_and_addresses(tmp_path):
    inventory = site_bench.write_inventory(str(tmp_path / "inv"), 32)
    with open(os.path.join(inventory, "hosts.yml")) as f:
        gpus = yaml.safe_load(f)["all"]["children"]["gpu_nodes"]["hosts"]
    assert len({v["fabric_port_guids"][0] for v in gpus.values()}) == 32
    assert len({v["lab_fabric_address"] for v in gpus.values()}) == 32


def test_mitogen_connection_is_a_host_variable(tmp_path):
    inventory = site_bench.write_inventory(str(tmp_path / "inv"), 2, connection="podman")
    with open(os.path.join(inventory, "hosts.yml")) as f:
        children = yaml.safe_load(f)["all"]["children"]
    hosts = {**children["gpu_nodes"]["hosts"], **children["subnet_managers"]["hosts"]}
    assert {values["ansible_connection"] for values in hosts.values()} == {"podman"}


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
