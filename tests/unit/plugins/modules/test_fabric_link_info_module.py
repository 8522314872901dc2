"""fabric_link_info run as Ansible runs it (a separate Python process with its arguments as JSON), on a fake root
and sysfs, with a fake `systemctl` first on PATH that answers `is-active` and records that it was asked."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
MODULE = os.path.join(REPO, "plugins", "modules", "fabric_link_info.py")

FAKE_SYSTEMCTL = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls"
[ "$1" = is-active ] || exit 2
shift
if [ -n "$FAKE_NO_SYSTEMD" ]; then echo "System has not been booted with systemd as init system" >&2; exit 1; fi
rc=0
for unit in "$@"; do
  case " $FAKE_ACTIVE " in *" $unit "*) echo active ;; *) echo inactive; rc=3 ;; esac
done
exit $rc
"""


@pytest.fixture
def host(tmp_path):
    root = tmp_path / "root"
    net = root / "sys" / "class" / "net"
    for name, link_type, mtu in (("eth1", 1, 4200), ("ib0", 32, 4092)):
        (net / name).mkdir(parents=True)
        (net / name / "type").write_text(f"{link_type}\n")
        (net / name / "mtu").write_text(f"{mtu}\n")
    conf = root / "proc" / "sys" / "net" / "ipv4" / "conf" / "all"
    conf.mkdir(parents=True)
    (conf / "arp_ignore").write_text("0\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(FAKE_SYSTEMCTL)
    (bin_dir / "systemctl").chmod(0o755)
    return root


def add(root, *paths):
    for path in paths:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("")


def calls(root):
    path = root.parent / "bin" / "calls"
    return path.read_text().splitlines() if path.exists() else []


def run_module(root, active=(), no_systemd=False, **args):
    args = {"sysfs_root": str(root / "sys"), "root": str(root), **args}
    args_file = root.parent / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
        PATH=str(root.parent / "bin") + os.pathsep + os.environ.get("PATH", ""),
        FAKE_ACTIVE=" ".join(active),
    )
    env.pop("FAKE_NO_SYSTEMD", None)
    if no_systemd:
        env["FAKE_NO_SYSTEMD"] = "1"
    proc = subprocess.run(
        [sys.executable, MODULE, str(args_file)], capture_output=True, text=True, env=env, check=False
    )
    return json.loads(proc.stdout)


def test_links_only_by_default(host):
    result = run_module(host, names=["eth1", "ib0", "ib7"])
    assert result["changed"] is False
    assert (result["links"]["eth1"]["type"], result["links"]["ib0"]["infiniband"]) == (1, True)
    assert result["links"]["ib7"] == {"name": "ib7", "exists": False}
    assert "backend" not in result and result["sysctls_present"] == []
    assert calls(host) == []


def test_sysctls_present(host):
    keys = ["net.ipv4.conf.all.arp_ignore", "net.ipv4.neigh.default.gc_thresh1"]
    assert run_module(host, names=[], sysctls=keys)["sysctls_present"] == ["net.ipv4.conf.all.arp_ignore"]


def test_netplan_decides_without_systemctl(host):
    add(host, "usr/sbin/netplan", "etc/netplan/01-site.yaml")
    assert run_module(host, names=[], detect_backend=True, active=["NetworkManager.service"])["backend"] == "netplan"
    assert calls(host) == []


@pytest.mark.parametrize(
    ("active", "expected"),
    [
        (["NetworkManager.service", "systemd-networkd.service"], "NetworkManager"),
        (["systemd-networkd.service"], "systemd-networkd"),
        ([], "ifupdown"),
    ],
)
def test_one_systemctl_call_decides_the_daemons(host, active, expected):
    add(host, "sbin/ifup", "etc/network/interfaces")
    assert run_module(host, names=[], detect_backend=True, active=active)["backend"] == expected
    assert calls(host) == ["is-active NetworkManager.service systemd-networkd.service"]


def test_no_systemd_and_no_ifupdown_finds_nothing(host):
    result = run_module(host, names=["eth1"], detect_backend=True, no_systemd=True)
    assert result["backend"] is None and "failed" not in result
