import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpucluster.fabric.plugins.module_utils import fabric_collect
from ansible_collections.gpucluster.fabric.plugins.modules import (
    fabric_validate_collect,
    gpu_topology_info,
    ib_port_info,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _run(module, args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


def test_ib_port_info_on_fake_tree(capsys):
    result = _run(
        ib_port_info,
        {"root": str(FIXTURES / "sysfs-softroce-vm2"), "modules": ["rdma_rxe", "nvidia_peermem"]},
        capsys,
    )
    assert result["changed"] is False
    assert result["rdma_present"] is True
    port = result["devices"][0]["ports"][0]
    assert (port["state"], port["rate_gbps"], port["active_mtu"]) == ("ACTIVE", 2.5, 4096)
    assert port["gids"][1]["gid"] == "0000:0000:0000:0000:0000:ffff:0a14:0002"
    assert result["modules_loaded"] == {"rdma_rxe": True, "nvidia_peermem": False}


def test_ib_port_info_without_devices(tmp_path, capsys):
    result = _run(ib_port_info, {"root": str(tmp_path)}, capsys)
    assert result["rdma_present"] is False
    assert result["devices"] == []


def test_ib_port_info_bad_root(tmp_path, capsys):
    result = _run(ib_port_info, {"root": str(tmp_path / "missing")}, capsys)
    assert result["failed"] is True
    assert "is not a directory" in result["msg"]


def test_gpu_topology_info_on_captured_output(capsys):
    result = _run(
        gpu_topology_info,
        {
            "topo_text": (FIXTURES / "h200-1gpu" / "nvidia-smi-topo-m.txt").read_text(),
            "query_text": (FIXTURES / "h200-1gpu" / "query-gpu.csv").read_text(),
        },
        capsys,
    )
    assert result["gpu_present"] is True
    assert result["gpus"][0]["name"] == "NVIDIA H200"
    assert result["nic_count"] == 0
    assert result["flagged"] == []
    assert result["affinity"][0]["reason"] == "no NIC in topology"


def test_gpu_topology_info_without_nvidia_smi(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(gpu_topology_info.AnsibleModule, "get_bin_path", lambda self, *a, **k: None)
    result = _run(gpu_topology_info, {}, capsys)
    assert result["gpu_present"] is False
    assert result["skipped_reason"] == "nvidia-smi not found"


def test_fabric_report_plot_writes_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")  # a controller-side requirement; ansible-test's units venv lacks it
    from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_checks import plot_series
    from ansible_collections.gpucluster.fabric.plugins.modules import fabric_report_plot

    hosts = {
        "h200": {"nccl": {"output": (FIXTURES / "nccl-torch-h200" / "nccl_allreduce_torch-h200-2gpu.txt").read_text()}},
        "vm1": {
            "rdma": [
                {
                    "test": "ib_write_bw",
                    "peer": "vm2",
                    "output": (FIXTURES / "softroce-qemu" / "ib_write_bw_x1_client_vm1.txt").read_text(),
                }
            ]
        },
    }
    series = plot_series(hosts)
    assert series["rdma"] == {"vm1": [{"peer": "vm2", "bw_avg_gbps": 0.14}]}
    assert len(series["nccl"]["h200"]) == 31
    target = tmp_path / "plot.png"
    result = _run(fabric_report_plot, {"path": str(target), "series": series}, capsys)
    assert result["panels"] == ["nccl", "rdma"]
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = _run(fabric_report_plot, {"path": str(target), "series": series}, capsys)
    assert again["changed"] is False
    series["rdma"]["vm1"][0]["bw_avg_gbps"] = 0.5
    assert _run(fabric_report_plot, {"path": str(target), "series": series}, capsys)["changed"] is True


def test_fabric_report_plot_without_matplotlib(tmp_path, capsys, monkeypatch):
    import builtins

    from ansible_collections.gpucluster.fabric.plugins.modules import fabric_report_plot

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    result = _run(fabric_report_plot, {"path": str(tmp_path / "p.png"), "series": {}}, capsys)
    assert result["failed"] is True
    assert "matplotlib is required on the controller" in result["msg"]


def _replaying_nvidia_smi(tmp_path, monkeypatch, topo_exit=0):
    """An nvidia-smi that replays the H200 capture, found by get_bin_path (the real one is not on this machine)."""
    capture = FIXTURES / "h200-1gpu"
    script = tmp_path / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'case "$*" in "topo -m") cat {capture}/nvidia-smi-topo-m.txt; exit {topo_exit} ;;\n'
        f"  *) exec cat {capture}/query-gpu.csv ;; esac\n"
    )
    script.chmod(0o755)
    real = fabric_validate_collect.AnsibleModule.get_bin_path

    def get_bin_path(self, name, *args, **kwargs):
        return str(script) if name == "nvidia-smi" else real(self, name, *args, **kwargs)

    monkeypatch.setattr(fabric_validate_collect.AnsibleModule, "get_bin_path", get_bin_path)


def test_fabric_validate_collect_reads_everything_in_one_call(tmp_path, monkeypatch, capsys):
    _replaying_nvidia_smi(tmp_path, monkeypatch)
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_IB_HCA==rxe0\n")
    result = _run(
        fabric_validate_collect,
        {
            "root": str(FIXTURES / "sysfs-softroce-vm2"),
            "modules": ["rdma_rxe"],
            "nccl_conf_path": str(conf),
            "interfaces": [{"name": "eth1", "expected_mtu": 4200}, {"name": "ib9", "expected_mtu": 4092}],
            "packages": ["dpkg", "gpucluster-no-such-package"],
        },
        capsys,
    )
    assert result["changed"] is False
    # Versions from this machine's real dpkg database; a package it does not have reads as null.
    dpkg = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", "dpkg"], capture_output=True, text=True, check=True
    ).stdout
    assert result["versions"] == {
        "packages": {"dpkg": dpkg, "gpucluster-no-such-package": None},
        "kernel": os.uname().release,
    }
    assert sorted(result["ib"]) == ["devices", "modules_loaded", "rdma_present"]
    assert result["ib"]["rdma_present"] is True
    assert result["ib"]["devices"][0]["ports"][0]["active_mtu"] == 4096
    assert result["ib"]["modules_loaded"] == {"rdma_rxe": True}
    assert sorted(result["gpu"]) == sorted(fabric_collect.GPU_KEYS)
    assert result["gpu"]["gpus"][0]["name"] == "NVIDIA H200"
    assert result["nccl_conf"] == {"path": str(conf), "content": "NCCL_IB_HCA==rxe0\n"}
    assert result["interfaces"] == [
        {"name": "eth1", "expected_mtu": 4200, "mtu": 4200},
        {"name": "ib9", "expected_mtu": 4092, "mtu": None},
    ]


def test_fabric_validate_collect_agrees_with_the_single_modules(tmp_path, monkeypatch, capsys):
    _replaying_nvidia_smi(tmp_path, monkeypatch)
    root = str(FIXTURES / "sysfs-softroce-vm1")
    collected = _run(fabric_validate_collect, {"root": root, "modules": ["ib_core"]}, capsys)
    ib = _run(ib_port_info, {"root": root, "modules": ["ib_core"]}, capsys)
    gpu = _run(gpu_topology_info, {}, capsys)
    assert collected["ib"] == {key: ib[key] for key in ("rdma_present", "devices", "modules_loaded")}
    assert collected["gpu"] == {key: gpu[key] for key in fabric_collect.GPU_KEYS}


def test_fabric_validate_collect_on_a_bare_host(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(fabric_validate_collect.AnsibleModule, "get_bin_path", lambda self, *a, **k: None)
    result = _run(
        fabric_validate_collect,
        {"root": str(tmp_path), "nccl_conf_path": str(tmp_path / "absent.conf"), "interfaces": [{"name": "eth1"}]},
        capsys,
    )
    assert result["ib"] == {"rdma_present": False, "devices": [], "modules_loaded": {}}
    assert result["gpu"]["gpu_present"] is False
    assert result["gpu"]["skipped_reason"] == "nvidia-smi not found"
    assert result["nccl_conf"]["content"] is None
    assert result["interfaces"] == [{"name": "eth1", "expected_mtu": None, "mtu": None}]


def test_fabric_validate_collect_failures(tmp_path, monkeypatch, capsys):
    result = _run(fabric_validate_collect, {"root": str(tmp_path / "missing")}, capsys)
    assert result["failed"] is True
    assert result["msg"] == f"root={tmp_path / 'missing'} is not a directory"
    monkeypatch.setattr(fabric_validate_collect.AnsibleModule, "get_bin_path", lambda self, *a, **k: None)
    result = _run(fabric_validate_collect, {"root": str(tmp_path), "nccl_conf_path": str(tmp_path)}, capsys)
    assert result["failed"] is True
    assert result["msg"].startswith(f"cannot read {tmp_path}: ")


def test_fabric_validate_collect_fails_when_topo_fails(tmp_path, monkeypatch, capsys):
    _replaying_nvidia_smi(tmp_path, monkeypatch, topo_exit=3)
    result = _run(fabric_validate_collect, {"root": str(tmp_path), "nccl_conf_path": str(tmp_path / "x")}, capsys)
    assert result["failed"] is True
    assert result["msg"].startswith("nvidia-smi topo -m failed (rc=3)")


def test_fabric_validate_collect_reads_again_while_a_port_waits_for_the_sm(tmp_path, monkeypatch, capsys):
    # A copy of the Soft-RoCE tree whose port is LinkUp but INIT, as before the subnet manager's first sweep; the
    # (patched) sleep between two reads is where the SM makes it ACTIVE.
    root = tmp_path / "root"
    shutil.copytree(FIXTURES / "sysfs-softroce-vm2", root)
    state = root / "sys" / "class" / "infiniband" / "rxe0" / "ports" / "1" / "state"
    state.write_text("2: INIT\n")
    sleeps = []
    activate_after = [2]

    def sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == activate_after[0]:
            state.write_text("4: ACTIVE\n")

    monkeypatch.setattr(fabric_collect.time, "sleep", sleep)
    args = {"root": str(root), "settle_seconds": 60, "settle_delay": 3, "use_ibv_devinfo": False}
    result = _run(fabric_validate_collect, args, capsys)
    assert result["attempts"] == 3 and sleeps == [3, 3]
    assert result["ib"]["devices"][0]["ports"][0]["state"] == "ACTIVE"
    # Out of time: the last read is returned (INIT, judged by the role), not a failure; 0 s reads once.
    state.write_text("2: INIT\n")
    sleeps.clear()
    activate_after[0] = 0
    result = _run(fabric_validate_collect, dict(args, settle_seconds=7), capsys)
    assert result["attempts"] == 3 and result["ib"]["devices"][0]["ports"][0]["state"] == "INIT"
    assert "failed" not in result
    assert _run(fabric_validate_collect, dict(args, settle_seconds=0), capsys)["attempts"] == 1


def test_gpu_topology_info_fails_when_nvidia_smi_fails(monkeypatch, tmp_path, capsys):
    """An installed nvidia-smi that cannot read the GPUs (driver gone, GPU off the bus) is a failure, not a skip."""
    tool = tmp_path / "nvidia-smi"
    tool.write_text(
        "#!/bin/sh\necho 'Unable to determine the device handle for GPU0000:17:00.0: Unknown Error' >&2\nexit 15\n"
    )
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    result = _run(gpu_topology_info, {}, capsys)
    assert result["failed"] is True and result["gpu_present"] is False
    assert "rc=15" in result["failed_reason"] and "Unknown Error" in result["msg"]
