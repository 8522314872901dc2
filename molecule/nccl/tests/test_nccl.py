"""Verify nccl on a converged host against the lab CUDA mirror (testinfra)."""

import pytest

PIN = "2.21.5-1+cuda12.4"
VERSION_CODE = 22105  # ncclGetVersion for 2.21.5: 2*10000 + 21*100 + 5
PACKAGES = ["libnccl2", "libnccl-dev"]
NCCL_CONF = ["NCCL_DEBUG=WARN", "NCCL_IB_HCA==mlx5_0,mlx5_1", "NCCL_IB_TC=106", "NCCL_SOCKET_IFNAME==eth0"]  # sorted


@pytest.mark.parametrize("name", PACKAGES)
def test_exact_version_installed(host, name):
    package = host.package(name)
    assert package.is_installed
    assert package.version == PIN


@pytest.mark.parametrize("name", PACKAGES)
def test_held(host, name):
    assert host.check_output(f"dpkg --get-selections {name}").split() == [name, "hold"]


def test_pinned_in_apt_preferences(host):
    policy = host.check_output("apt-cache policy libnccl2 libnccl-dev")
    assert policy.count(f"Candidate: {PIN}") == 2, policy
    assert "1001" in policy


def test_upgrade_leaves_nccl_alone(host):
    simulation = host.check_output("apt-get --simulate --yes dist-upgrade")
    assert not [line for line in simulation.splitlines() if line.startswith(("Inst libnccl", "Remv libnccl"))]


def test_explicit_install_of_other_build_is_refused(host):
    result = host.run("apt-get --simulate --yes install libnccl2=2.23.4-1+cuda12.6 libnccl-dev=2.23.4-1+cuda12.6")
    assert result.rc != 0
    assert "Held packages were changed" in result.stdout + result.stderr


def test_loaded_library_reports_the_pin(host):
    script = (
        "import ctypes; lib = ctypes.CDLL('libnccl.so.2'); v = ctypes.c_int(); "
        "assert lib.ncclGetVersion(ctypes.byref(v)) == 0; print(v.value)"
    )
    assert int(host.check_output(f'python3 -c "{script}"')) == VERSION_CODE


def test_library_file_is_nvidias_build(host):
    path = host.check_output("readlink -f /usr/lib/x86_64-linux-gnu/libnccl.so.2")
    assert path == "/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5"
    assert host.run(f"grep -a -c 'NCCL version 2.21.5+cuda12.4' {path}").stdout.strip() != "0"


def test_headers_match(host):
    header = host.file("/usr/include/nccl.h").content_string
    assert "#define NCCL_VERSION_CODE 22105" in header


def test_nccl_conf(host):
    conf = host.file("/etc/nccl.conf")
    assert conf.mode == 0o644
    lines = [line for line in conf.content_string.splitlines() if line and not line.startswith("#")]
    assert lines == NCCL_CONF
