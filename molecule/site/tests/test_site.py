"""The whole fabric after playbooks/site.yml on the lab: every role's result, the fabric OpenSM built, the report."""

import json
import os
import re
from pathlib import Path

import pytest
import testinfra
import testinfra.utils.ansible_runner

RUNNER = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"])
GPU_NODES = RUNNER.get_hosts("gpu_nodes")
SUBNET_MANAGERS = RUNNER.get_hosts("subnet_managers")
UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"


def _host(name):
    # The lab inventory names its connection containers.podman.podman, which testinfra's Ansible inventory reader
    # does not map to a backend; the inventory host name is the container's name.
    return testinfra.get_host(f"podman://{name}")


def _vars(name):
    return RUNNER.get_variables(name)


def _guid(text):
    return "0x" + text.lower().removeprefix("0x").rjust(16, "0")


@pytest.mark.parametrize("name", GPU_NODES)
def test_rdma_user_space_and_nccl_held(name):
    host = _host(name)
    for package in ("rdma-core", "ibverbs-utils", "infiniband-diags", "perftest"):
        assert host.package(package).is_installed, package
    for package in ("libnccl2", "libnccl-dev"):
        assert host.package(package).version == "2.21.5-1+cuda12.4"
    holds = host.check_output("apt-mark showhold").split()
    assert "libnccl2" in holds and "libnccl-dev" in holds
    conf = host.file("/etc/nccl.conf").content_string
    assert "NCCL_SOCKET_IFNAME==eth1" in conf
    assert "NCCL_IB_HCA==ibsim0" in conf


@pytest.mark.parametrize("name", GPU_NODES)
def test_fabric_interface_applied_and_persisted(name):
    host = _host(name)
    address = _vars(name)["lab_fabric_address"]
    assert host.file("/sys/class/net/eth1/mtu").content_string.strip() == "4200"
    assert address in host.check_output("ip -o -4 addr show dev eth1")
    persisted = host.run("grep -rh -A6 'iface eth1' /etc/network/interfaces /etc/network/interfaces.d").stdout
    assert re.search(r"mtu 4200", persisted), persisted


@pytest.mark.parametrize("name", SUBNET_MANAGERS)
def test_opensm_master_with_tenant_partition(name):
    host = _host(name)
    sm_guid = _guid(_vars(name)["fabric_port_guids"][0])
    assert host.service(f"opensm@{sm_guid}.service").is_running
    env = f"cd /var/tmp && LD_PRELOAD={UMAD2SIM} SIM_HOST=H-{sm_guid[2:]}"
    assert "SMINFO_MASTER" in host.check_output(f"{env} sminfo")
    partitions = host.file("/etc/opensm/partitions.conf").content_string
    for gpu in GPU_NODES:
        assert _guid(_vars(gpu)["fabric_port_guids"][0]) in partitions
    # The GPU nodes' simulated ports carry the training partition as full members (0x8101), as OpenSM programmed.
    ports = host.check_output(f"{env} ibnetdiscover -p")
    for gpu in GPU_NODES:
        guid = _guid(_vars(gpu)["fabric_port_guids"][0])
        lid = re.search(rf"^CA\s+(\d+)\s+1\s+{guid}\s", ports, re.MULTILINE)
        assert lid, ports
        pkeys = host.check_output(f"{env} smpquery pkeys {lid.group(1)}")
        assert "0x8101" in pkeys, pkeys


def _latest_report():
    reports = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "reports"
    runs = sorted(p for p in reports.iterdir() if (p / "report.json").is_file())
    assert runs, f"no report under {reports}"
    return json.loads((runs[-1] / "report.json").read_text())


def test_report_health_tier_passed_on_every_gpu_node():
    report = _latest_report()
    checks = report["checks"]
    assert report["summary"]["failed"] == 0, [c for c in checks if c["status"] == "failed"]
    for gpu in GPU_NODES:
        mine = {c["check"]: c for c in checks if c["host"] == gpu}
        assert mine["port.state[ibsim0/1]"]["status"] == "passed", mine
        assert mine["port.rate[ibsim0/1]"]["status"] == "passed", mine
        assert mine["interface.mtu[eth1]"]["status"] == "passed", mine
        assert mine["nccl.conf"]["status"] == "passed", mine
