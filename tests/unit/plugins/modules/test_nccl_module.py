"""Module nccl run as Ansible runs it (a separate Python process with its arguments as JSON), its files on a tree.

This machine has no NCCL and no CUDA repository, so the package decision is the one of a fresh host before
cuda_repo ran (before_repository); installs, holds, version changes and the loaded library are proven against the
lab's CUDA mirror by scenario nccl (and scenario site).
"""

import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _process  # noqa: E402

PIN = "etc/apt/preferences.d/gpucluster-nccl"
ARGS = {
    "host": "gpu1",
    "header": "#\n# Ansible managed\n#",
    "nccl_version": "2.21.5",
    "cuda_version": "12.4",
    "conf": {"NCCL_IB_HCA": ["mlx5_0", "mlx5_1"], "NCCL_SOCKET_IFNAME": "=ib0"},
    "before_repository": True,
}


def run_module(tmp_path, args, check=False, diff=False, **extra):
    return _process.run_module("nccl", tmp_path, check, diff, **{**args, **extra})


def test_pin_and_conf_written_once(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    conf = "/etc/nccl.conf"  # below root
    predicted = run_module(tmp_path, ARGS, check=True, diff=True, root=str(root), conf_path=conf)
    assert predicted["changed"] is True and not (root / "etc").exists()
    assert predicted["package_version"] == "2.21.5-1+cuda12.4" and predicted["unverifiable"] is True
    first = run_module(tmp_path, ARGS, root=str(root), conf_path=conf)
    assert [change["what"] for change in first["changes"]] == ["/etc/apt/preferences.d/gpucluster-nccl", conf]
    pin = (root / PIN).read_text()
    assert pin.endswith("Package: libnccl2 libnccl-dev\nPin: version 2.21.5-1+cuda12.4\nPin-Priority: 1001\n")
    assert (root / "etc/nccl.conf").read_text() == (
        "#\n# Ansible managed\n#\nNCCL_IB_HCA==mlx5_0,mlx5_1\nNCCL_SOCKET_IFNAME==ib0\n"
    )
    assert run_module(tmp_path, ARGS, root=str(root), conf_path=conf)["changed"] is False


def test_every_input_problem_at_once_before_any_change(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    bad = dict(ARGS, nccl_version="2.21", conf={"NCCL_ALGO": "Ring", "NCCL_CONF_FILE": "/x"})
    result = run_module(tmp_path, bad, root=str(root))
    assert result["failed"] is True and result["changed"] is False
    lines = result["msg"].splitlines()
    assert (
        lines[0]
        == "gpu1: nccl_version='2.21' is not an NCCL release number X.Y.Z; write it as a quoted string, e.g. '2.21.5'"
    )
    assert any("NCCL_ALGO is a debug-only NCCL variable" in line for line in lines)
    assert any("NCCL_CONF_FILE is read from the environment only" in line for line in lines)
    assert list(root.iterdir()) == []


def test_a_build_the_repositories_do_not_offer_is_refused(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    index = {"libnccl2": ["2.23.4-1+cuda12.6"], "libnccl-dev": ["2.23.4-1+cuda12.6"]}
    result = run_module(tmp_path, ARGS, root=str(root), offered_index=index)
    assert result["failed"] is True and "is not offered by the configured apt repositories" in result["msg"]
    assert list(root.iterdir()) == []


def test_restore_pin(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    put_back = run_module(tmp_path, ARGS, root=str(root), restore_pin="2.18.3-1+cuda12.2")
    assert put_back["changes"] == [{"what": "/etc/apt/preferences.d/gpucluster-nccl", "why": "it is missing"}]
    assert "Pin: version 2.18.3-1+cuda12.2\n" in (root / PIN).read_text()
    removed = run_module(tmp_path, ARGS, root=str(root), restore_pin="absent")
    assert removed["changed"] is True and not (root / PIN).exists()


def test_library_check_without_nccl_fails_with_the_fix(tmp_path):
    result = run_module(tmp_path, ARGS, library=True)
    assert result["failed"] is True
    assert "libnccl.so.2 cannot be loaded" in result["msg"] and "ldconfig -p | grep nccl" in result["msg"]


def test_library_in_place_checks_only_when_apt_has_nothing_to_do(tmp_path):
    """No NCCL here: the packages are not in place, so apt and the check after it are the role's; the module writes
    the pin and returns no version_code (a library check here would fail: nothing to load)."""
    root = tmp_path / "root"
    root.mkdir()
    result = run_module(tmp_path, ARGS, root=str(root), library_in_place=True)
    assert result.get("failed") is not True, result
    assert result["in_place"] is False and "version_code" not in result
    assert (root / PIN).exists()


MINIMUMS = [
    {"feature": "nvls", "component": "nccl", "minimum": "2.17", "source": "release notes"},
    {"feature": "dmabuf", "component": "kernel", "minimum": "999.0", "source": "kernel docs"},
    {"feature": "dmabuf", "component": "rdma-core", "minimum": "34", "source": "rdma-core v34"},
]


def test_feature_minimums_are_checked_with_the_other_input_before_any_change(tmp_path):
    """A kernel below a feature's minimum fails with the source; this machine's rdma-core (none, or a version) is
    judged or warned about as not checked, never passed; an unknown feature is named with the known ones."""
    root = tmp_path / "root"
    root.mkdir()
    args = dict(ARGS, required_features=["nvls", "dmabuf", "rdma_magic"], feature_minimums=MINIMUMS)
    result = run_module(tmp_path, args, root=str(root), state="checked")
    assert result["failed"] is True and list(root.iterdir()) == []
    lines = result["msg"].splitlines()
    kernel = os.uname().release
    assert f"gpu1: nccl_required_features: dmabuf needs kernel >= 999.0 (kernel docs): this host has {kernel}" in lines
    assert "gpu1: nccl_required_features: unknown feature 'rdma_magic'; known: dmabuf, nvls" in lines
    assert not any(line.startswith("gpu1: nccl_required_features: nvls") for line in lines)  # 2.21.5 >= 2.17
    installed = subprocess.run(
        ["dpkg-query", "--show", "--showformat", "${Version}", "rdma-core"], capture_output=True, text=True, check=False
    )
    if installed.returncode != 0:  # no rdma-core here: not checked, said so
        assert "rdma-core version unknown on this host" in str(result["warnings"]), result
    elif int(installed.stdout.split(".")[0]) < 34:
        assert any("dmabuf needs rdma-core >= 34" in line for line in lines)
    else:
        assert not any("rdma-core" in line for line in lines) and "rdma-core" not in str(result.get("warnings"))


def test_features_met_pass(tmp_path):
    minimums = [row for row in MINIMUMS if row["component"] == "nccl"]
    args = dict(ARGS, required_features=["nvls"], feature_minimums=minimums)
    result = run_module(tmp_path, args, root=str(tmp_path), state="checked")
    assert not result.get("failed"), result


def test_nccl_before_2_21_on_roce_gets_the_gid_index_in_nccl_conf(tmp_path):
    """The kernel lab's rxe0 on eth1 (tests/fixtures/sysfs-softroce-vm1: its RoCE v2 IPv4 GID at index 1) below the
    module's root: NCCL 2.18 cannot choose the GID, so the module writes the index; 2.21 writes none."""
    root = tmp_path / "root"
    shutil.copytree(os.path.join(_process.REPO, "tests", "fixtures", "sysfs-softroce-vm1"), root, symlinks=True)
    old = dict(ARGS, nccl_version="2.18.5", cuda_version="12.2", roce_interfaces=["eth1"])
    first = run_module(tmp_path, old, root=str(root))
    assert not first.get("failed"), first
    assert "NCCL_IB_GID_INDEX=1\n" in (root / "etc/nccl.conf").read_text()
    assert run_module(tmp_path, old, root=str(root))["changed"] is False
    run_module(tmp_path, dict(old, nccl_version="2.21.5", cuda_version="12.4"), root=str(root))
    assert "NCCL_IB_GID_INDEX" not in (root / "etc/nccl.conf").read_text()
    outside = run_module(tmp_path, dict(old, ib_gid_index=9), root=str(root), state="checked")
    assert (
        outside["failed"] and "gpu1: nccl_ib_gid_index=9 is outside the GID table of eth1's RDMA port" in outside["msg"]
    )
