"""The lab's addresses live on networks the project makes itself, never on one another tool may or may not have made.

A new machine's first `make lab` once failed because the lab mirror listened on podman's default gateway, an address
that exists only while some container sits on podman's default network: elsewhere it is routed off the machine. These
tests hold the rule on any machine, including one where a leftover bridge would hide the fault.
"""

import ipaddress
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "lab"))

import local_addresses  # noqa: E402

# Real answers of `ip -j` and `podman network ls --format json` (podman 4.3.1, CNI), trimmed to what is read.
PODMAN_NETWORKS = json.dumps(
    [
        {"name": "podman", "driver": "bridge", "network_interface": "cni-podman0"},
        {"name": "gpucluster-mgmt", "driver": "bridge", "network_interface": "cni-podman1"},
    ]
)
ROUTES = {
    "10.89.88.11": [{"dst": "10.89.88.11", "dev": "cni-podman1", "prefsrc": "10.89.80.1", "flags": []}],
    "10.89.79.1": [{"type": "local", "dst": "10.89.79.1", "dev": "lo", "prefsrc": "10.89.79.1", "flags": []}],
    "10.88.0.1": [{"type": "local", "dst": "10.88.0.1", "dev": "lo", "prefsrc": "10.88.0.1", "flags": []}],
    "10.77.0.1": [{"dst": "10.77.0.1", "gateway": "192.0.2.1", "dev": "eth0", "prefsrc": "192.0.2.2", "flags": []}],
}
HOLDERS = {"10.89.79.1": "gpucluster-svc", "10.88.0.1": "cni-podman0"}


def fake_run(argv):
    if argv[:3] == ["podman", "network", "ls"]:
        return PODMAN_NETWORKS
    if argv[:4] == ["ip", "-j", "route", "get"]:
        return json.dumps(ROUTES[argv[4]])
    if argv[:4] == ["ip", "-j", "-4", "addr"]:
        address = argv[-1].split("/")[0]
        return json.dumps([{"ifname": HOLDERS[address], "addr_info": [{"local": address}]}])
    raise AssertionError(argv)


def test_addresses_on_the_projects_bridges_pass():
    assert local_addresses.problems(["10.89.88.11", "http://10.89.79.1:8642/signed"], run=fake_run) == []


@pytest.mark.parametrize(
    ("value", "interface"),
    [
        # podman's default gateway, local here only because a container once joined podman's default network
        ("http://10.88.0.1:8642/signed", "cni-podman0"),
        # not local at all: the default route would take it off the machine
        ("10.77.0.1", "eth0"),
    ],
)
def test_an_address_elsewhere_is_named_with_its_interface(value, interface):
    (problem,) = local_addresses.problems([value], run=fake_run)
    assert problem.startswith(f"{value}: reached through {interface}, which this project did not make")


def test_serve_refuses_an_address_not_on_this_machine():
    address = "198.51.100.7"  # TEST-NET-2 (RFC 5737): bound or not, never sent to
    route = json.loads(subprocess.run(["ip", "-j", "route", "get", address], capture_output=True, text=True).stdout)
    assert route[0].get("type") != "local", "this machine holds TEST-NET-2; the test needs an address it does not hold"
    serve = ROOT / "tests" / "lab" / "mirror" / "serve.py"
    result = subprocess.run(
        [sys.executable, str(serve), address, "8642", str(ROOT)], capture_output=True, text=True, timeout=10
    )
    assert result.returncode != 0
    assert f"{address} is not an address of this machine" in result.stderr


def _networks():
    """{name: subnet} of every network the project makes, read where each is made."""
    lab = yaml.safe_load((ROOT / "inventories/lab/group_vars/all.yml").read_text())
    mirror = (ROOT / "tests/lab/mirror/mirror.sh").read_text()
    mirror_net = "{}/{}".format(
        re.search(r"^default_address=(\S+)", mirror, re.M)[1], re.search(r"^default_prefix=(\d+)", mirror, re.M)[1]
    )
    create = yaml.safe_load((ROOT / "molecule/_shared/ssh/create.yml").read_text())[0]["vars"]
    smoke = re.search(r"--subnet (\S+) gpucluster-smoke", (ROOT / "tests/lab/tarball-smoke/run.sh").read_text())[1]
    return {
        lab["lab_mgmt_network"]: ipaddress.ip_network(lab["lab_mgmt_subnet"]),
        "gpucluster-svc": ipaddress.ip_interface(mirror_net).network,
        create["__ssh_network"]: ipaddress.ip_network(create["__ssh_subnet"]),
        "gpucluster-smoke": ipaddress.ip_network(smoke),
    }


def test_the_projects_networks_do_not_overlap_and_are_not_podmans_default():
    networks = _networks()
    default = ipaddress.ip_network("10.88.0.0/16")  # podman's default network (rootful, CNI and netavark)
    for name, net in networks.items():
        assert name.startswith(local_addresses.NETWORK_PREFIX) or name == local_addresses.MIRROR_BRIDGE, name
        assert not net.overlaps(default), name
        for other, other_net in networks.items():
            assert other == name or not net.overlaps(other_net), (name, other)


def test_every_management_address_lies_in_the_management_network():
    mgmt = _networks()["gpucluster-mgmt"]
    found = []
    for path in [ROOT / "inventories/lab/hosts.yml", *sorted((ROOT / "molecule/site/host_vars").glob("*.yml"))]:
        found += re.findall(r"lab_mgmt_address: (\S+)", path.read_text())
    bench = re.search(r'^BENCH_MGMT_PREFIX = "(\S+)"', (ROOT / "tests/bench/site_bench.py").read_text(), re.M)[1]
    found.append(bench + ".2")
    assert len(found) >= 10
    assert [a for a in found if ipaddress.ip_address(a) not in mgmt] == []


def test_no_lab_file_leans_on_podmans_default_network():
    """What the lab gives its hosts and the controller comes from the project's own networks only."""
    places = [ROOT / "inventories/lab", ROOT / "molecule", ROOT / "tests/lab", ROOT / "tests/bench", ROOT / ".config"]
    offenders = []
    removes_it = ROOT / "tests/lab/new-machine.sh"  # the one script that reads it: to delete its bridge
    for place in places:
        for path in place.rglob("*"):
            if path != removes_it and path.is_file() and path.suffix in {".yml", ".yaml", ".sh", ".py", ".cfg", ".j2"}:
                text = path.read_text(errors="replace")
                if re.search(r"\b10\.88\.\d+\.\d+|network inspect podman\b|IP_FREEBIND", text):
                    offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
