"""Module rdma_modules run as Ansible runs it (a separate Python process with its arguments as JSON), on a root tree.

The tree stands for / (files are read and written below it); modules are never loaded into a tree, so loading is
proven on real kernels (scenario kernel_softroce) and the files, the input checks, check mode and the diff here.
"""

import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _process  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
H200 = os.path.join(REPO, "tests", "fixtures", "gpudirect", "h200-firecracker")
HEADER = "#\n# Ansible managed\n#"
LOAD_CONF = "etc/modules-load.d/gpucluster-rdma.conf"
SOFTDEP_CONF = "etc/modprobe.d/gpucluster-rdma.conf"
PEERMEM_CONF = "etc/modules-load.d/gpucluster-nvidia-peermem.conf"
ARGS = {
    "host": "gpu1",
    "header": HEADER,
    "core_modules": ["ib_core", "ib_uverbs", "ib_umad", "rdma_ucm"],
    "extra_modules": ["nvme-rdma"],
    "interfaces": [{"name": "ib0", "kind": "ipoib"}, {"name": "eth1", "kind": "roce", "softroce": "rxe0"}],
    "softdeps": [{"module": "mlx5_ib", "pre": ["mlx5_core"]}],
    "hca_driver_map": {"mlx5_core": ["mlx5_core", "mlx5_ib"]},
    "hca_unbound_modules": ["mlx5_core", "mlx5_ib"],
}


def run_module(tmp_path, args, check=False, diff=False, **extra):
    return _process.run_module("rdma_modules", tmp_path, check, diff, **{**args, **extra})


@pytest.fixture
def root(tmp_path):
    """An empty host: /proc without modules support, nothing in /etc."""
    tree = tmp_path / "root"
    (tree / "proc").mkdir(parents=True)
    return tree


def test_writes_the_files_then_changes_nothing(tmp_path, root):
    first = run_module(tmp_path, ARGS, root=str(root))
    assert first["changed"] is True, first
    assert [change["what"] for change in first["changes"]] == ["/" + LOAD_CONF, "/" + SOFTDEP_CONF]
    assert all(change["why"] == "it is missing" for change in first["changes"])
    load = (root / LOAD_CONF).read_text()
    assert load.startswith(HEADER + "\n# RDMA kernel modules, loaded at boot by systemd-modules-load")
    assert load.splitlines()[4:] == ["ib_core", "ib_uverbs", "ib_umad", "rdma_ucm", "ib_ipoib", "rdma_rxe", "nvme_rdma"]
    assert (root / SOFTDEP_CONF).read_text().endswith("\nsoftdep mlx5_ib pre: mlx5_core\n")
    assert oct((root / LOAD_CONF).stat().st_mode & 0o777) == "0o644"
    assert not (root / PEERMEM_CONF).exists()
    # no NVIDIA driver in this tree: GPUDirect is none, and modules are not loaded into a tree
    assert first["gpudirect"]["mode"] == "none"
    assert first["runtime_load"]["load"] is False and "loads them at boot" in first["msg"]

    again = run_module(tmp_path, ARGS, root=str(root))
    assert again["changed"] is False and again["changes"] == []


def test_check_mode_reports_the_changes_with_a_diff_and_writes_nothing(tmp_path, root):
    predicted = run_module(tmp_path, ARGS, check=True, diff=True, root=str(root))
    assert predicted["changed"] is True
    assert not (root / "etc").exists()
    (load,) = [d for d in predicted["diff"] if d["after_header"] == "/" + LOAD_CONF]
    assert load["before"] == "" and "rdma_rxe\n" in load["after"]
    applied = run_module(tmp_path, ARGS, root=str(root))
    assert applied["changes"] == predicted["changes"]


def test_only_what_differs_is_changed(tmp_path, root):
    run_module(tmp_path, ARGS, root=str(root))
    # a module more in the inventory: the load file changes, the softdep file does not
    changed = run_module(tmp_path, dict(ARGS, extra_modules=["nvme-rdma", "rpcrdma"]), diff=True, root=str(root))
    assert changed["changes"] == [{"what": "/" + LOAD_CONF, "why": "its content differs"}]
    (diff,) = changed["diff"]
    assert "rpcrdma" not in diff["before"] and diff["after"].endswith("nvme_rdma\nrpcrdma\n")
    # no softdeps asked for any more: the file goes
    removed = run_module(tmp_path, dict(ARGS, extra_modules=["nvme-rdma", "rpcrdma"], softdeps=[]), root=str(root))
    assert removed["changes"] == [{"what": "/" + SOFTDEP_CONF, "why": "it is not wanted (removed)"}]
    assert not (root / SOFTDEP_CONF).exists()
    # a mode changed by hand is put back
    (root / LOAD_CONF).chmod(0o600)
    mode = run_module(tmp_path, dict(ARGS, extra_modules=["nvme-rdma", "rpcrdma"], softdeps=[]), root=str(root))
    assert mode["changes"] == [{"what": "/" + LOAD_CONF, "why": "mode 0644"}]


def test_every_input_problem_at_once_before_any_change(tmp_path, root):
    bad = dict(ARGS, extra_modules=["ib_core; reboot"], core_modules=["$(touch /tmp/pwned)"], softdeps=[{"pre": "x"}])
    result = run_module(tmp_path, bad, root=str(root))
    assert result["failed"] is True and result["changed"] is False
    lines = result["msg"].splitlines()
    assert len(lines) == 3 and all(line.startswith("gpu1: ") for line in lines), lines
    assert any('"ib_core; reboot" in rdma_modules_extra is not a kernel module name' in line for line in lines)
    assert any("rdma_modules_softdeps[0]=" in line for line in lines)
    assert not (root / "etc").exists()


def test_a_mode_the_host_cannot_honour_fails_before_any_change(tmp_path, root):
    result = run_module(tmp_path, dict(ARGS, mode="peermem"), root=str(root))
    assert result["failed"] is True
    assert result["msg"].startswith("gpu1: rdma_modules_gpudirect_mode=peermem: GPUDirect mode peermem was requested")
    assert not (root / "etc").exists()


def test_state_checked_changes_nothing(tmp_path, root):
    result = run_module(tmp_path, ARGS, root=str(root), state="checked")
    assert result["changed"] is False and result["changes"] == []
    assert result["wanted"][-1] == "nvme_rdma"
    assert not (root / "etc").exists()


def test_the_captured_h200_gets_dmabuf_and_no_peermem_file(tmp_path):
    tree = tmp_path / "h200"
    shutil.copytree(H200, tree, symlinks=True)
    (tree / PEERMEM_CONF).parent.mkdir(parents=True, exist_ok=True)
    (tree / PEERMEM_CONF).write_text("nvidia_peermem\n")  # left by an earlier peermem setup
    result = run_module(tmp_path, ARGS, root=str(tree))
    assert result["gpudirect"]["mode"] == "dmabuf"
    assert {"what": "/" + PEERMEM_CONF, "why": "it is not wanted (removed)"} in result["changes"]
    assert not (tree / PEERMEM_CONF).exists()
