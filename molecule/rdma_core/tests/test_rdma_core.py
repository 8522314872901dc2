"""Verify the rdma_core role on a converged host (testinfra)."""

import os

import pytest

PACKAGES = ["rdma-core", "ibverbs-utils", "ibverbs-providers", "rdmacm-utils", "perftest", "infiniband-diags"]
# What libibverbs prints when the host has no RDMA device: a container has no /sys/class/infiniband_verbs
# ("Function not implemented"); a host with ib_core but no HCA reports "No IB devices found".
# The limit converge asked for (tests/lab/memlock-kib.sh): "unlimited", or half the machine's hard
# limit where the machine cannot raise it (no CAP_SYS_RESOURCE).
MEMLOCK = os.environ.get("GPUCLUSTER_MOLECULE_MEMLOCK_KIB") or "unlimited"
NO_DEVICE_MESSAGES = ("No IB devices found", "Failed to get IB devices list")


@pytest.mark.parametrize("name", PACKAGES)
def test_package_installed(host, name):
    assert host.package(name).is_installed


def test_dev_headers_not_installed_by_default(host):
    assert not host.package("libibverbs-dev").is_installed


def test_ibv_devinfo_runs_and_reports_no_device(host):
    # exit status 255 is libibverbs' "no device list"; a crash would be a signal (rc > 128 but not 255). ssh exits
    # 255 on its own errors too, so the status comes back as output.
    result = host.run('ibv_devinfo; echo "rc=$?"')
    rc = int(result.stdout.rstrip().rsplit("rc=", 1)[1])
    assert rc in (0, 255), result
    output = result.stdout + result.stderr
    assert any(message in output for message in NO_DEVICE_MESSAGES), output
    assert "hca_id" not in output


def test_perftest_binary_runs(host):
    result = host.run("ib_write_bw --help")
    assert "ib_write_bw" in (result.stdout + result.stderr)


def test_limits_file(host):
    limits = host.file("/etc/security/limits.d/90-gpucluster-rdma-memlock.conf")
    assert limits.exists
    assert limits.mode == 0o644
    assert f"*     hard  memlock  {MEMLOCK}" in limits.content_string


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_memlock_unlimited_for_new_login(host, user):
    result = host.check_output(f"su -l -s /bin/sh -c 'ulimit -l' {user}")
    assert result.strip() == MEMLOCK


def test_systemd_default_memlock_in_force(host):
    expected = "infinity" if MEMLOCK == "unlimited" else str(int(MEMLOCK) * 1024)
    assert host.check_output("systemctl show --property DefaultLimitMEMLOCK") == f"DefaultLimitMEMLOCK={expected}"


def test_memlock_unlimited_for_new_service(host):
    result = host.check_output("systemd-run --quiet --wait --pipe --collect /bin/sh -c 'ulimit -l'")
    assert result.strip() == MEMLOCK
