"""The whole fabric after playbooks/site.yml on the lab: every role's result, the fabric OpenSM built, the report."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import testinfra
import testinfra.utils.ansible_runner

RUNNER = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"])
GPU_NODES = RUNNER.get_hosts("gpu_nodes")
SUBNET_MANAGERS = RUNNER.get_hosts("subnet_managers")
UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"


def _vars(name):
    return RUNNER.get_variables(name)


def _ssh_dir(name):
    # The lab's SSH material (tests/lab/playbooks/lab_up.yml); the inventory's own values are Jinja, which testinfra
    # does not template, so the same paths are built here from LAB_SSH_ROOT and the host's lab_name.
    return Path(os.environ["LAB_SSH_ROOT"]) / _vars(name)["lab_name"]


def _host(name):
    """The host over SSH, as Ansible reaches it: its management address and the lab's ssh_config (key, known_hosts)."""
    return testinfra.get_host(
        f"ssh://root@{_vars(name)['lab_mgmt_address']}", ssh_config=str(_ssh_dir(name) / "ssh_config")
    )


def _container_networks(name):
    """{network: {MacAddress, IPAddress, ...}} of the host's container, as podman attached it."""
    out = subprocess.run(["podman", "inspect", name], capture_output=True, text=True, check=True).stdout
    return json.loads(out)[0]["NetworkSettings"]["Networks"]


def _fabric_network(name):
    """The podman network of the lab's fabric bridge: the container's one network besides the management one."""
    others = [network for network in _container_networks(name) if network != _vars(name)["lab_mgmt_network"]]
    assert len(others) == 1, others
    return others[0]


def _interface_with_mac(host, mac):
    links = json.loads(host.check_output("ip -j link show"))
    names = [link["ifname"] for link in links if link.get("address", "").lower() == mac.lower()]
    assert len(names) == 1, (mac, links)
    return names[0]


@pytest.mark.parametrize("name", [*GPU_NODES, *SUBNET_MANAGERS])
def test_reached_over_ssh_with_the_lab_known_hosts(name):
    """The connection is SSH with strict host key checking against the lab's known_hosts, never podman exec."""
    assert os.environ.get("ANSIBLE_TRANSPORT", "ssh") == "ssh"
    known = (_ssh_dir(name) / "known_hosts").read_text().split()
    assert _vars(name)["lab_mgmt_address"] in known
    # What ssh makes of the lab's ssh_config for this host (ssh -G): the lab's known_hosts only, checked strictly.
    effective = subprocess.run(
        ["ssh", "-G", "-F", str(_ssh_dir(name) / "ssh_config"), _vars(name)["lab_mgmt_address"]],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert "stricthostkeychecking true" in effective
    assert f"userknownhostsfile {_ssh_dir(name) / 'known_hosts'}" in effective
    assert "globalknownhostsfile /dev/null" in effective
    host = _host(name)
    assert host.backend.NAME == "ssh"
    assert host.check_output("hostname") == name
    # The management interface is eth0, attached to the lab management network at the inventory's address.
    mgmt = _container_networks(name)[_vars(name)["lab_mgmt_network"]]
    assert mgmt["IPAddress"] == _vars(name)["lab_mgmt_address"]
    assert _interface_with_mac(host, mgmt["MacAddress"]) == "eth0"


@pytest.mark.parametrize("name", GPU_NODES)
def test_fabric_address_on_the_fabric_bridge_interface_and_traffic_leaves_through_it(name):
    """The fabric address sits on the interface podman attached to the fabric bridge (by MAC, not by name), and
    traffic to the other node's fabric address leaves through it: the route, the counters and the neighbour entry
    (the peer's fabric MAC, so no ARP flux through the management NIC)."""
    host = _host(name)
    fabric_network = _fabric_network(name)
    fabric = _interface_with_mac(host, _container_networks(name)[fabric_network]["MacAddress"])
    assert fabric == "eth1"
    address = _vars(name)["lab_fabric_address"].split("/")[0]
    assert address in host.check_output(f"ip -o -4 addr show dev {fabric}")
    assert address not in host.check_output(f"ip -o -4 addr show | grep -v ' {fabric} ' || true")
    for peer in GPU_NODES:
        if peer == name:
            continue
        peer_address = _vars(peer)["lab_fabric_address"].split("/")[0]
        peer_mac = _container_networks(peer)[fabric_network]["MacAddress"].lower()
        route = json.loads(host.check_output(f"ip -j route get {peer_address} from {address}"))[0]
        assert route["dev"] == fabric, route
        counters = f"/sys/class/net/{fabric}/statistics/tx_packets"
        before = int(host.check_output(f"cat {counters}"))
        # Ten UDP datagrams from the fabric address to the peer's (discard port): ARP, then the datagrams.
        host.check_output(
            "python3 -c 'import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
            's.bind((sys.argv[1], 0)); [s.sendto(b"x", (sys.argv[2], 9)) for _ in range(10)]\' '
            f"{address} {peer_address}"
        )
        assert int(host.check_output(f"cat {counters}")) - before >= 10
        neighbours = json.loads(host.check_output(f"ip -j neigh show {peer_address}"))
        assert neighbours and all(n["dev"] == fabric for n in neighbours), neighbours
        assert {n.get("lladdr", "").lower() for n in neighbours} == {peer_mac}, neighbours


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


@pytest.mark.parametrize("name", GPU_NODES)
def test_roce_qos_persisted_and_unsupported_settings_said_so(name):
    # A veth has no DCB and no RDMA device: nothing of the QoS can be applied, and both the boot-time script (run
    # here as the unit runs it) and the report say why, per setting; the files that re-apply it at boot are in place.
    host = _host(name)
    assert host.service("gpucluster-roce-qos.service").is_enabled
    settings = json.loads(host.file("/etc/gpucluster/roce_qos.json").content_string)
    assert settings == {
        "interfaces": {
            "eth1": {"trust": "dscp", "pfc_priorities": [3], "dscp_map": {"26": 3, "48": 6}, "tos": 106, "ecn": True}
        }
    }
    assert host.file("/etc/udev/rules.d/90-gpucluster-roce-qos.rules").contains("gpucluster-roce-qos.service")
    boot = "/usr/local/lib/gpucluster-fabric/gpucluster_fabric_roce_qos/roce_qos_boot.py"
    out = host.check_output(f"python3 {boot} /etc/gpucluster/roce_qos.json 0")
    for setting in ("pfc", "dscp_map", "ecn", "tos"):
        assert re.search(rf"^eth1 {setting}: unsupported \(.+\)$", out, re.M), out
    mine = {c["check"]: c for c in _latest_report()["checks"] if c["host"] == name}
    for setting in ("pfc", "dscp_map", "ecn", "tos"):
        check = mine[f"roce_qos.{setting}[eth1]"]
        assert check["status"] == "skipped" and "not applied: " in check["message"], check


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


@pytest.mark.parametrize("name", [*GPU_NODES, *SUBNET_MANAGERS])
def test_intent_on_the_node_root_only_and_without_keys(name):
    """Each host holds its intent (gpucluster.fabric.intent): the roles it got, each applier's values; root's only;
    OpenSM's keys are not in it (they stay in opensm.conf, which OpenSM reads)."""
    host = _host(name)
    intent_file = host.file("/etc/gpucluster/fabric.json")
    assert intent_file.user == "root" and intent_file.mode == 0o600
    intent = json.loads(intent_file.content_string)
    assert intent["schema"] == 1 and intent["host"] == name
    variables = _vars(name)
    if name in GPU_NODES:
        roles = {"rdma_core", "rdma_modules", "hca_firmware", "cuda_repo", "nccl", "fabric_interfaces", "roce_qos"}
        roles |= {"fabric_validate"}
        assert roles | {"node_check"} == set(intent["roles"])
        assert intent["roles"]["nccl"]["nccl_version"] == "2.21.5"
        (eth1,) = [i for i in intent["roles"]["fabric_interfaces"]["interfaces"] if i["name"] == "eth1"]
        assert eth1["mtu"] == 4200
    else:
        assert set(intent["roles"]) == {"opensm", "node_check"}
        # The partitions once, as OpenSM reads them (Default first; 15-bit P_Keys), beside the applier's files.
        assert intent["roles"]["opensm"]["partition_list"][1]["pkey"] == 0x0101
        assert set(intent["roles"]["opensm"]) == {"unit", "diag_environment", "partition_list", "applier"}
        for key in ("opensm_m_key", "opensm_sm_key", "opensm_sa_key", "conf"):
            assert key not in intent["roles"]["opensm"]["applier"]
            value = str(variables.get(key) or "")
            assert not value or value[2:].lstrip("0") not in intent_file.content_string, key


@pytest.mark.parametrize("name", [*GPU_NODES, *SUBNET_MANAGERS])
def test_node_check_passes_on_the_converged_node_and_is_scraped(name):
    """The node's own check (role node_check) judges the converged node as intended, runs on its timer, and its
    metrics are in what node_exporter serves."""
    host = _host(name)
    assert host.service("gpucluster-fabric-check.timer").is_enabled
    assert host.service("gpucluster-fabric-check.timer").is_running
    run = host.run("gpucluster-fabric-check --json - --no-metrics --no-slurm")
    report = json.loads(run.stdout)
    assert run.rc == 0 and report["status"] == "passed", report["reason"]
    names = {check["check"] for check in report["checks"]}
    if name in GPU_NODES:
        assert {"drift.nccl", "drift.fabric_interfaces", "interface.mtu[eth1]", "port.state[ibsim0/1]"} <= names
    metrics = host.check_output(
        "python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:9100/metrics').read().decode())\""
    )
    assert "gpucluster_fabric_check_up 1" in metrics
    assert 'gpucluster_fabric_checks{state="failed"} 0' in metrics


def _latest_run():
    reports = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "reports"
    runs = sorted(p for p in reports.iterdir() if (p / "report.json").is_file())
    assert runs, f"no report under {reports}"
    return runs[-1]


def _latest_report():
    return json.loads((_latest_run() / "report.json").read_text())


def test_report_has_a_heat_map_of_every_host_and_no_empty_plot():
    run = _latest_run()
    report = json.loads((run / "report.json").read_text())
    assert report["figures"]["files"][0] == "heatmap.png", report["figures"]
    assert (run / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Every validated host is a row of the heat map (the grid is drawn from the checks).
    assert set(report["hosts"]) <= {c["host"] for c in report["checks"]}
    measured = any(c["tier"] in ("rdma", "nccl") and c["status"] != "skipped" for c in report["checks"])
    assert ("plot.png" in report["figures"]["files"]) == (run / "plot.png").exists()
    if not measured:
        assert not (run / "plot.png").exists(), "a plot of empty panels"


def test_report_reads_tenant_isolation_from_the_subnet_managers():
    """site.yml's validation report holds each subnet manager's own checks, asked from outside the GPU nodes' play:
    its OpenSM's state, and per partition and per port the P_Keys the fabric holds against partitions.conf."""
    report = _latest_report()
    for sm in SUBNET_MANAGERS:
        mine = {c["check"]: c for c in report["checks"] if c["host"] == sm}
        assert mine["sm.state"]["status"] == "passed" and mine["sm.state"]["measured"] == "SMINFO_MASTER", mine
        ports = {name: c for name, c in mine.items() if name.startswith("partition.port[")}
        for gpu in GPU_NODES:
            assert ports[f"partition.port[{_guid(_vars(gpu)['fabric_port_guids'][0])}]"]["status"] == "passed", ports
        partitions = [c for name, c in mine.items() if name.startswith("partition[")]
        assert partitions and all(c["status"] == "passed" for c in partitions), partitions
    assert [c["status"] for c in report["checks"] if c["check"] == "fleet.sm_master"] == ["passed"]


def test_report_health_tier_passed_on_every_gpu_node():
    report = _latest_report()
    checks = report["checks"]
    assert report["summary"]["failed"] == 0, [c for c in checks if c["status"] == "failed"]
    for gpu in GPU_NODES:
        mine = {c["check"]: c for c in checks if c["host"] == gpu}
        assert mine["port.state[ibsim0/1]"]["status"] == "passed", mine
        assert mine["port.rate[ibsim0/1]"]["status"] == "passed", mine
        # Real OpenSM answered sminfo through this node's simulated HCA, asked from the subnet manager.
        assert mine["sm.master[ibsim0/1]"]["status"] == "passed", mine
        assert mine["interface.mtu[eth1]"]["status"] == "passed", mine
        assert mine["nccl.conf"]["status"] == "passed", mine
