"""fabric_interfaces on veth stand-ins: run-time state, persisted files, and the backend re-applying them."""

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

IB, ROCE = "ib0", "ens1f0"
SHARED = Path(__file__).resolve().parents[1]
ROLE_MAIN = SHARED.parents[2] / "roles" / "fabric_interfaces" / "tasks" / "main.yml"
# Every step's tag, as tasks/main.yml imports them.
STEPS = sorted({tag for task in yaml.safe_load(ROLE_MAIN.read_text()) for tag in task.get("tags", [])})


@pytest.fixture(scope="module")
def backend():
    return os.environ["FABRIC_INTERFACES_TEST_BACKEND"]


def mtu(host, name):
    return int(host.file(f"/sys/class/net/{name}/mtu").content_string.strip())


def wait_for_mtu(host, name, wanted, seconds=20):
    for _ in range(seconds * 2):
        if mtu(host, name) == wanted:
            return True
        time.sleep(0.5)
    return False


def spoil(host, *names):
    """Set a wrong MTU by hand, so that only the backend can put the right one back."""
    for name in names:
        host.run_expect([0], f"ip link set dev {name} mtu 1500")
        assert mtu(host, name) == 1500


def test_runtime_mtu_and_addresses(host):
    assert mtu(host, IB) == 4092
    assert mtu(host, ROCE) == 9000
    assert "10.10.0.11/16" in host.check_output(f"ip -o addr show dev {IB}")
    assert "10.20.0.11/16" in host.check_output(f"ip -o addr show dev {ROCE}")


def test_multirail_sysctls_persisted_and_live(host):
    conf = host.file("/etc/sysctl.d/60-gpucluster-fabric.conf")
    assert conf.mode == 0o644
    lines = set(conf.content_string.splitlines())
    for key, value in [("arp_ignore", 2), ("arp_announce", 2), ("rp_filter", 2), ("accept_local", 1)]:
        assert f"net.ipv4.conf.all.{key}={value}" in lines
        assert host.file(f"/proc/sys/net/ipv4/conf/all/{key}").content_string.strip() == str(value)
    # one peer (this host) x two rails stays at the kernel defaults
    for family in ("ipv4", "ipv6"):
        for key, value in [("gc_thresh1", 128), ("gc_thresh2", 512), ("gc_thresh3", 1024)]:
            assert f"net.{family}.neigh.default.{key}={value}" in lines


def test_softroce_unit_written_valid_and_enabled(host):
    unit = host.file("/etc/systemd/system/gpucluster-softroce-rxe0.service")
    create = "rdma link show rxe0/1 >/dev/null 2>&1 || exec rdma link add rxe0 type rxe netdev ens1f0"
    assert f"ExecStart=/bin/sh -c '{create}'" in unit.content_string
    assert "BindsTo=sys-subsystem-net-devices-ens1f0.device" in unit.content_string
    host.run_expect([0], "systemd-analyze verify /etc/systemd/system/gpucluster-softroce-rxe0.service")
    assert host.run("systemctl is-enabled gpucluster-softroce-rxe0.service").stdout.strip() == "enabled"


def test_ifupdown_reapplies_mtu(host, backend):
    if backend != "ifupdown":
        pytest.skip("ifupdown scenario only")
    for name, wanted, address in [(IB, 4092, "10.10.0.11"), (ROCE, 9000, "10.20.0.11")]:
        query = host.check_output(f"ifquery {name}").splitlines()
        assert f"mtu: {wanted}" in query and f"address: {address}" in query and "netmask: 255.255.0.0" in query
        spoil(host, name)
        # ifupdown did not bring the link up itself (the role did, at run time), so its state file does not list
        # it: --force makes ifdown deconfigure it anyway, then ifup applies the stanza from scratch.
        host.run_expect([0], f"ifdown --force {name}")
        assert "10.10.0.11" not in host.check_output(f"ip -o addr show dev {name}")
        host.run_expect([0], f"ifup {name}")
        assert mtu(host, name) == wanted
        assert f"{address}/16" in host.check_output(f"ip -o addr show dev {name}")
    stanza = host.file("/etc/network/interfaces.d/gpucluster-ib0").content_string
    assert "pre-up [ ! -e /sys/class/net/ib0/mode ] || echo datagram > /sys/class/net/ib0/mode" in stanza


def test_networkd_reapplies_mtu(host, backend):
    if backend != "systemd-networkd":
        pytest.skip("systemd-networkd scenario only")
    status = host.check_output(f"networkctl status {IB} --no-pager")
    assert "/etc/systemd/network/20-gpucluster-ib0.network" in status
    spoil(host, IB, ROCE)
    host.run_expect([0], f"networkctl reconfigure {IB} {ROCE}")
    assert wait_for_mtu(host, IB, 4092)
    assert wait_for_mtu(host, ROCE, 9000)
    assert 'ATTR{mode}="datagram"' in host.file("/etc/udev/rules.d/70-gpucluster-ipoib-mode.rules").content_string


def test_networkmanager_reapplies_mtu(host, backend):
    if backend != "NetworkManager":
        pytest.skip("NetworkManager scenario only")
    # NetworkManager's own reading of the IPoIB keyfile (a veth cannot carry an infiniband profile)
    ib = host.check_output("nmcli -g infiniband.mtu,infiniband.transport-mode connection show gpucluster-ib0")
    assert ib.splitlines() == ["4092", "datagram"]
    assert host.file("/etc/NetworkManager/system-connections/gpucluster-ib0.nmconnection").mode == 0o600
    spoil(host, ROCE)
    host.run_expect([0], "nmcli connection up gpucluster-ens1f0")
    assert wait_for_mtu(host, ROCE, 9000)
    assert "10.20.0.11/16" in host.check_output(f"ip -o addr show dev {ROCE}")


def test_netplan_reapplies_mtu(host, backend):
    if backend != "netplan":
        pytest.skip("netplan scenario only")
    spoil(host, IB, ROCE)
    host.run_expect([0], "netplan apply")
    assert wait_for_mtu(host, IB, 4092)
    assert wait_for_mtu(host, ROCE, 9000)
    generated = host.file("/run/systemd/network/10-netplan-ib0.network").content_string
    assert "MTUBytes=4092" in generated and "Address=10.10.0.11/16" in generated
    # infiniband-mode only where netplan knows it (>= 0.105: bookworm's 0.106, not bullseye's 0.101)
    version = host.check_output("dpkg-query -W -f='${Version}' netplan.io")
    knows_mode = host.run(f"dpkg --compare-versions {version} ge 0.105").rc == 0
    ours = host.file("/etc/netplan/60-gpucluster-fabric.yaml")
    assert ours.mode == 0o600
    assert ("infiniband-mode: datagram" in ours.content_string) == knows_mode
    assert ("Mode=datagram" in generated) == knows_mode
    assert 'ATTR{mode}="datagram"' in host.file("/etc/udev/rules.d/70-gpucluster-ipoib-mode.rules").content_string


@pytest.mark.parametrize("tag", STEPS)
def test_each_step_runs_alone_in_check_mode(tag):
    """`--tags fabric_interfaces_<step> --check` on the converged host: the step finds what it reads (the preflight
    and the module, whose result is the fact, carry every step's tag; converge.yml asserts the fact) and predicts no
    change."""
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    command = [shutil.which("ansible-playbook"), "-i", str(inventory), str(SHARED / "converge.yml")]
    # Molecule's environment forces colour, which would hide the recap from the pattern below.
    env = {**os.environ, "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1"}
    proc = subprocess.run([*command, "--tags", tag, "--check"], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    recap = re.findall(r"^\S+\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=0\s+failed=0", proc.stdout, re.MULTILINE)
    assert recap and all(changed == "0" for _ok, changed in recap), proc.stdout[-4000:]
    assert "Persist and apply the fabric interfaces" in proc.stdout
