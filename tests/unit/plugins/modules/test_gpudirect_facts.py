"""gpudirect_facts run as Ansible runs it (a separate Python process with its arguments as JSON)."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
MODULE = os.path.join(REPO, "plugins", "modules", "gpudirect_facts.py")
H200 = os.path.join(REPO, "tests", "fixtures", "gpudirect", "h200-firecracker")


def run_module(tmp_path, **args):
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run(
        [sys.executable, MODULE, str(args_file)], capture_output=True, text=True, env=env, check=False
    )
    return json.loads(proc.stdout)


def test_captured_h200_host(tmp_path):
    result = run_module(tmp_path, root=H200)
    assert result["changed"] is False
    assert result["gpudirect"]["mode"] == "dmabuf"
    assert result["gpudirect"]["reason"].startswith("DMA-BUF: kernel 6.18.44-fc-v657-gpu >= 5.12, rdma-core 50.0 >= 34")
    assert result["errors"] == [] and result["decision_warnings"] == []
    assert result["facts"]["runtime_load"]["possible"] is False
    assert result["hca_modules"] == []


def test_nccl_version_option(tmp_path):
    result = run_module(tmp_path, root=H200, nccl_version="21206")
    assert result["facts"]["nccl"] == {"version": "2.12.6", "source": "given"}
    assert result["gpudirect"]["mode"] == "none"
    assert "NCCL 2.12.6 < 2.13" in result["gpudirect"]["reason"]


def test_forced_peermem_without_driver_returns_the_error(tmp_path):
    root = tmp_path / "empty"
    (root / "proc").mkdir(parents=True)
    result = run_module(tmp_path, root=str(root), mode="peermem")
    assert "gpudirect" not in result
    assert result["errors"][0].startswith("GPUDirect mode peermem was requested but there is no NVIDIA kernel driver")


@pytest.mark.parametrize("mode", ["gdrcopy", "PEERMEM"])
def test_unknown_mode_is_refused_by_the_argument_spec(tmp_path, mode):
    result = run_module(tmp_path, root=H200, mode=mode)
    assert result["failed"] is True
    assert "value of mode must be one of: auto, peermem, dmabuf, none" in result["msg"]


def test_wanted_modules_in_load_order_and_runtime_load(tmp_path):
    result = run_module(
        tmp_path,
        root=H200,
        core_modules=["ib_core", "ib-uverbs"],
        extra_modules=["ib_ipoib", "ib_core"],
        hca_detect=True,
    )
    assert result["wanted"][:2] == ["ib_core", "ib_uverbs"]  # '-' spelled '_', each once
    assert result["wanted"][-1] == "ib_ipoib" and result["wanted"].count("ib_core") == 1
    # A captured tree is never loaded into: no dry run, whatever runtime_load says.
    assert result["runtime_load"]["load"] is False and result["load_errors"] == []
    forced = run_module(tmp_path, root=H200, core_modules=["ib_core"], runtime_load=True)
    assert forced["runtime_load"] == {"load": True, "why": "rdma_modules_runtime_load=true"}
    assert forced["load_errors"] == []  # the dry run is for the live system only
    off = run_module(tmp_path, root=H200, core_modules=["ib_core"], runtime_load="false")
    assert off["runtime_load"] == {"load": False, "why": "rdma_modules_runtime_load=false"}
