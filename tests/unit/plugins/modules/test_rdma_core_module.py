"""Module rdma_core run as Ansible runs it (a separate Python process with its arguments as JSON), on a root tree.

The tree stands for / (files are read and written below it, and systemd is never re-executed for a tree); the memlock
limits in force on a real login and service are proven by scenario rdma_core's testinfra (su -l, systemd-run).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _process  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
LIMITS = "etc/security/limits.d/90-gpucluster-rdma-memlock.conf"
SYSTEMD = "etc/systemd/system.conf.d/90-gpucluster-rdma-memlock.conf"
ARGS = {"host": "gpu1", "os_family": "Debian", "distribution": "Debian", "header": "#\n# Ansible managed\n#"}


def run_module(tmp_path, args, check=False, diff=False, **extra):
    return _process.run_module("rdma_core", tmp_path, check, diff, **{**args, **extra})


def test_limits_written_once_checked_first(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    predicted = run_module(tmp_path, ARGS, check=True, diff=True, root=str(root))
    assert predicted["changed"] is True and not (root / "etc").exists()
    assert [d["after_header"] for d in predicted["diff"]] == ["/" + LIMITS, "/" + SYSTEMD]
    assert predicted["apt_indexes"] is False
    first = run_module(tmp_path, ARGS, root=str(root))
    assert first["changes"] == predicted["changes"]
    assert "*     hard  memlock  unlimited\n" in (root / LIMITS).read_text()
    assert (root / SYSTEMD).read_text().endswith("DefaultLimitMEMLOCK=infinity\n")
    assert run_module(tmp_path, ARGS, root=str(root))["changed"] is False
    # turned off: the file goes, the other stays
    off = run_module(tmp_path, ARGS, root=str(root), memlock_pam=False)
    assert off["changes"] == [{"what": "/" + LIMITS, "why": "it is not wanted (removed)"}]
    assert not (root / LIMITS).exists() and (root / SYSTEMD).exists()


def test_apt_indexes_seen(tmp_path):
    root = tmp_path / "root"
    (root / "var/lib/apt/lists").mkdir(parents=True)
    (root / "var/lib/apt/lists/deb.example_dists_bookworm_main_binary-amd64_Packages.lz4").write_text("")
    assert run_module(tmp_path, ARGS, root=str(root), state="checked")["apt_indexes"] is True


def test_every_input_problem_at_once_before_any_change(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    bad = dict(ARGS, os_family="RedHat", distribution="Rocky", memlock="lots", services=["$(reboot)"])
    result = run_module(tmp_path, bad, root=str(root))
    assert result["failed"] is True and result["changed"] is False
    assert result["msg"].splitlines() == [
        "gpu1: rdma_core supports Debian hosts (Debian, Ubuntu); this host is Rocky (RedHat).",
        'gpu1: rdma_core_memlock=lots is not a limit; use "unlimited" or a size in KiB such as 67108864.',
        "gpu1: $(reboot) in rdma_core_services is not a valid unit name; remove it or fix its spelling.",
    ]
    assert list(root.iterdir()) == []


def test_packages_missing_read_from_dpkg_status(tmp_path):
    root = tmp_path / "root"
    status = root / "var/lib/dpkg/status"
    status.parent.mkdir(parents=True)
    fixtures = os.path.join(REPO, "tests", "fixtures", "gpudirect", "debian", "dpkg-status-bookworm-rdma-core.txt")
    with open(fixtures, encoding="utf-8") as handle:
        status.write_text(handle.read())
    wanted = ["rdma-core", "ibverbs-providers", "perftest"]
    result = run_module(tmp_path, ARGS, root=str(root), state="checked", packages=wanted)
    assert result["packages_missing"] == ["perftest"]
    # no dpkg database at all (not a Debian tree): everything is apt's
    assert (
        run_module(tmp_path, ARGS, root=str(tmp_path), state="checked", packages=wanted)["packages_missing"] == wanted
    )
