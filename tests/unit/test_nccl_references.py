"""NCCL tier: what NCCL's INFO lines say (data path, NVLS), reference rows by GPU count and NVLS, per-speed RDMA rows,
several benchmarks side by side.

The INFO fixture is real (all_gather_perf on one H200 with NCCL_DEBUG=INFO, no RDMA NIC). Lines for hosts with NICs
are written here from NCCL's own format strings (src/graph/topo.cc, src/init.cc, src/transport/net.cc,
src/transport/nvls.cc), with the values a ConnectX host prints; each test names the line it stands for.
"""

from pathlib import Path

import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_checks import (
    busbw_reference,
    evaluate,
    merge_thresholds,
    nccl_run_records,
    outlier_checks,
    plot_series,
    preflight_errors,
    rdma_checks,
    reference_measurement,
)
from ansible_collections.gpucluster.fabric.plugins.module_utils.nccl_debug import (
    nic_data_paths,
    nvls_used,
    parse_nccl_info,
)
from ansible_collections.gpucluster.fabric.plugins.module_utils.nccl_tests import parse_nccl_tests

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DEBUG_FIXTURE = FIXTURES / "nccl-tests-h200-1gpu" / "all_gather_perf-h200-1gpu-debuginfo.txt"
ONE_GPU = FIXTURES / "nccl-tests-h200-1gpu" / "all_reduce_perf-h200-1gpu.txt"
TORCH_ONE_GPU = FIXTURES / "nccl-torch-h200" / "nccl_allreduce_torch-h200-1gpu.txt"

THRESHOLDS = {
    "ib_write_bw_fraction_of_reference": {"value": 1.0, "source": "test"},
    "ib_write_bw_fraction_of_rate": {"value": 0.9, "source": "test"},
    "ib_write_lat_max_usec": {"value": 2.5, "source": "test"},
    "nccl_busbw_fraction_of_reference": {"value": 1.0, "source": "test"},
    "outlier_fraction_of_median": {"value": 0.9, "source": "test"},
}
H200_ROWS = [
    {"gpu": "H200", "gpus_per_node": 8, "nvls": True, "busbw_gbps": 431, "size_bytes": 8589934592, "source": "az (x)"},
]
HOST = "h200:1:1 [0] NCCL INFO "
# NCCL's lines on a host with two ConnectX NICs and GPUDirect (format strings in the module docstring).
GDR_LINES = "\n".join(
    [
        HOST + "NCCL version 2.21.5+cuda12.4",
        HOST + "DMA-BUF is available on GPU device 0",
        HOST + "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:10.0.0.1<0>",
        HOST + "Using network IB",
        HOST + "NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
        HOST + "NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1'",
        HOST + "NVLS multicast support is not available on dev 0",
        HOST + "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
        HOST + "Channel 01/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
        HOST + "Channel 02/0 : 0[0] -> 8[0] [send] via NET/IB/1",
    ]
)


def test_real_info_lines_of_a_host_without_nic():
    info = parse_nccl_info(DEBUG_FIXTURE.read_text())
    assert info["info"] is True
    assert info["version"] == "2.28.9+cuda13.0"
    assert info["network"] == "Socket"
    assert info["nics"] == {} and info["net_channels"] == {}
    # One GPU: NCCL prints no NVLS line; the run's environment decides.
    assert info["nvls"] is None
    assert nvls_used(info, {"NCCL_NVLS_ENABLE": "0"}) is False
    assert nvls_used(info, {}) is None
    # The table around the INFO lines still parses.
    assert parse_nccl_tests(DEBUG_FIXTURE.read_text())["ok"]


def test_gpudirect_lines_give_the_path_per_nic():
    info = parse_nccl_info(GDR_LINES)
    assert info["nics"] == {"mlx5_0": {"gdr": True, "index": 0}, "mlx5_1": {"gdr": False, "index": 1}}
    assert info["dmabuf_gpus"] == [0]
    assert info["net_channels"] == {0: {"gdr": 2, "plain": 0}, 1: {"gdr": 0, "plain": 1}}
    assert info["nvls"] is False
    assert nic_data_paths(info) == {"mlx5_0": "dmabuf", "mlx5_1": "none"}
    no_dmabuf = parse_nccl_info(GDR_LINES.replace("DMA-BUF is available", "(no DMA-BUF line)"))
    assert nic_data_paths(no_dmabuf) == {"mlx5_0": "peermem", "mlx5_1": "none"}
    assert parse_nccl_info("NCCL INFO NVLS multicast support is available on dev 3")["nvls"] is True


def _host(output, mode="dmabuf", gpus=8, conf=None, environment=None):
    return {
        "gpu": {"gpu_present": True, "gpus": [{"name": "NVIDIA H200"}] * gpus},
        "gpudirect": {"mode": mode, "reason": "test"} if mode else None,
        "nccl_conf": {"path": "/etc/nccl.conf", "content": conf},
        "nccl": [{"tool": "nccl-tests", "output": output, "rc": 0, "environment": environment or {}}],
    }


def _checks(data, references=None, tiers=("nccl",)):
    config = {
        "tiers": list(tiers),
        "thresholds": merge_thresholds(THRESHOLDS, {}),
        "references": H200_ROWS if references is None else references,
    }
    return {c["check"]: c for c in evaluate({"h200": data}, config)["checks"] if c["host"] == "h200"}


def test_data_path_matches_the_decision_or_fails():
    checks = _checks(_host(ONE_GPU.read_text() + GDR_LINES, mode="dmabuf"))
    assert checks["nccl.data_path[mlx5_0]"]["status"] == "passed"
    assert "through DMA-BUF" in checks["nccl.data_path[mlx5_0]"]["message"]
    assert "2 network connection(s) through it read GPU memory directly" in checks["nccl.data_path[mlx5_0]"]["message"]
    failed = checks["nccl.data_path[mlx5_1]"]
    assert (failed["status"], failed["measured"], failed["threshold"]) == ("failed", "none", "dmabuf")
    assert "stages every transfer through host memory" in failed["message"]
    # peermem decided, NCCL took DMA-BUF: GPUDirect works, the note says why.
    checks = _checks(_host(ONE_GPU.read_text() + GDR_LINES, mode="peermem"))
    assert checks["nccl.data_path[mlx5_0]"]["status"] == "passed"
    assert "NCCL prefers DMA-BUF" in checks["nccl.data_path[mlx5_0]"]["message"]
    # No decision recorded: nothing to compare with.
    assert _checks(_host(ONE_GPU.read_text() + GDR_LINES, mode=None))["nccl.data_path[mlx5_0]"]["status"] == "skipped"


def test_data_path_without_nic_or_without_info_is_skipped_with_the_reason():
    check = _checks(_host(DEBUG_FIXTURE.read_text()))["nccl.data_path"]
    assert check["status"] == "skipped" and "NCCL listed no RDMA NIC (network Socket)" in check["message"]
    check = _checks(_host(ONE_GPU.read_text()))["nccl.data_path"]
    assert check["status"] == "skipped" and "no NCCL_DEBUG=INFO lines" in check["message"]


def _eight_ranks(busbw):
    """The real one-rank H200 table as an 8-rank one with ``busbw`` at every size (as in test_fabric_checks)."""
    text = ONE_GPU.read_text()
    rank_line = next(line for line in text.splitlines() if "Rank  0" in line)
    text = text.replace(
        rank_line, "\n".join([rank_line] + [rank_line.replace("Rank  0", f"Rank  {i}") for i in range(1, 8)])
    )
    lines = []
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0].isdigit() and len(fields) >= 12:
            fields[7] = f"{busbw:.2f}"
            line = "  ".join(fields)
        lines.append(line)
    return "\n".join(lines)


def test_nvls_rows_judge_only_runs_with_the_same_nvls():
    assert busbw_reference(H200_ROWS, "NVIDIA H200", 8, True) == H200_ROWS[0]
    assert busbw_reference(H200_ROWS, "NVIDIA H200", 8, False) is None
    assert busbw_reference(H200_ROWS, "NVIDIA H200", 8, None) is None
    any_nvls = [dict(H200_ROWS[0], nvls=None)]
    assert busbw_reference(any_nvls, "NVIDIA H200", 8, False) == any_nvls[0]
    nvls_on = HOST + "NVLS multicast support is available on dev 0\n"
    on = _checks(_host(_eight_ranks(440.0) + "\n" + nvls_on))["nccl.all_reduce[nccl-tests]"]
    assert (on["status"], on["threshold"]) == ("passed", 431.0)
    assert "8x H200, NVLS on" in on["message"]
    # NVLS off (the site's environment): the NVLS-on row does not apply, and the report says what is missing.
    off = _checks(_host(_eight_ranks(360.0), environment={"NCCL_NVLS_ENABLE": "0"}))["nccl.all_reduce[nccl-tests]"]
    assert off["status"] == "skipped"
    assert "no published busbw figure for 8x NVIDIA H200, NVLS off" in off["message"]
    assert "8 GPUs, NVLS on (az)" in off["message"]
    # nccl.conf's NCCL_NVLS_ENABLE=0 counts as well; the run's environment wins over it.
    assert (
        "NVLS off"
        in _checks(_host(_eight_ranks(360.0), conf="NCCL_NVLS_ENABLE=0\n"))["nccl.all_reduce[nccl-tests]"]["message"]
    )
    unknown = _checks(_host(_eight_ranks(360.0)))["nccl.all_reduce[nccl-tests]"]
    assert "NVLS use unknown (run with NCCL_DEBUG=INFO)" in unknown["message"]


def test_a_shape_nobody_publishes_names_the_missing_source():
    rows = [dict(H200_ROWS[0], gpus_per_node=8)]
    text = _eight_ranks(300.0).replace("nRanks 8", "nRanks 2")
    data = _host(text)
    data["nccl"][0]["output"] = "\n".join(
        line for line in text.splitlines() if not any(f"Rank  {i}" in line for i in range(2, 8))
    )
    check = _checks(data, rows)["nccl.all_reduce[nccl-tests]"]
    assert check["status"] == "skipped"
    assert "no published busbw figure for 2x NVIDIA H200" in check["message"]
    assert "add a row with its source to fabric_validate_busbw_references" in check["message"]
    assert "table has no row for this GPU model" in _checks(data, [])["nccl.all_reduce[nccl-tests]"]["message"]


def test_sweep_rows_compare_the_mean_busbw():
    parsed = parse_nccl_tests(_eight_ranks(400.0))
    row = {
        "gpu": "B200",
        "gpus_per_node": 8,
        "busbw_gbps": 440,
        "min_bytes": 1 << 30,
        "size_bytes": 1 << 33,
        "source": "oci",
    }
    assert reference_measurement(parsed, row) == (f"{1 << 30}-{1 << 33}", 400.0)
    assert reference_measurement(parsed, dict(row, size_bytes=1 << 34)) is None  # the run stopped at 8 GiB


def test_both_benchmarks_side_by_side_each_judged_and_plotted():
    data = _host(ONE_GPU.read_text(), gpus=1)
    data["nccl"].append({"tool": "pytorch", "output": TORCH_ONE_GPU.read_text(), "rc": 0})
    checks = _checks(data)
    for tool in ("nccl-tests", "pytorch"):
        check = checks[f"nccl.all_reduce[{tool}]"]
        assert check["status"] == "skipped" and "1 rank: bus bandwidth is 0 by definition" in check["message"]
    series = plot_series({"h200": data})
    assert series["nccl"] == {}  # one rank: nothing moved, nothing to draw
    assert [line.split(":")[0] for line in series["left_out"]] == ["h200 (nccl-tests)", "h200 (pytorch)"]


def test_outliers_compare_each_benchmark_with_its_own_kind():
    checks = [
        {"host": h, "tier": "nccl", "check": f"nccl.all_reduce[{tool}]", "status": "passed", "measured": v}
        for h, tool, v in (
            ("a", "nccl-tests", 440.0),
            ("b", "nccl-tests", 445.0),
            ("c", "nccl-tests", 300.0),
            ("a", "pytorch", 300.0),
            ("b", "pytorch", 310.0),
            ("c", "pytorch", 305.0),
        )
    ]
    result = {(c["host"], c["check"]): c["status"] for c in outlier_checks(checks, THRESHOLDS)}
    assert result[("c", "outlier.nccl.busbw[nccl-tests]")] == "failed"
    assert {result[(h, "outlier.nccl.busbw[pytorch]")] for h in "abc"} == {"passed"}


def test_run_records_keep_what_ran_with_output_rc_and_environment():
    ran = {"stdout": "out", "stderr": "err", "rc": 3}
    not_run = {"skipped": True, "changed": False}
    records = nccl_run_records([not_run, ran], ["nccl-tests", "pytorch"], {"NCCL_NVLS_ENABLE": 0})
    assert records == [{"tool": "pytorch", "output": "out\nerr", "rc": 3, "environment": {"NCCL_NVLS_ENABLE": "0"}}]


NDR = {"name": "NDR", "rate_gbps": 400, "bw_gbps": 390, "size_bytes": 1048576, "source": "azure hb176rs_v4"}


def _bw_output(gbps, size=1048576):
    """The real Soft-RoCE ib_write_bw client output (tests/fixtures/softroce-qemu) with its result row's size and
    average set as an NDR port would print them."""
    text = (FIXTURES / "softroce-qemu" / "ib_write_bw_x1_client_vm1.txt").read_text()
    return text.replace(
        " 65536      1000             0.23               0.14",
        f" {size}      1000             {gbps}               {gbps}",
    )


@pytest.mark.parametrize(
    ("gbps", "size", "status", "words"),
    [
        (392.1, 1048576, "passed", "390 Gb/s published for NDR 400"),
        (350.0, 1048576, "failed", "threshold 390.0 Gb/s"),
        (392.1, 65536, "skipped", "set fabric_validate_rdma_bw_size to at least 1048576"),
    ],
)
def test_rdma_bandwidth_against_the_row_for_the_port_speed(gbps, size, status, words):
    record = {
        "ib": {
            "rdma_present": True,
            "devices": [{"name": "mlx5_0", "ports": [{"port": 1, "state": "ACTIVE", "rate_gbps": 400.0}]}],
        },
        "rdma": [{"test": "ib_write_bw", "peer": "gpu2", "output": _bw_output(gbps, size)}],
    }
    (check,) = rdma_checks("gpu1", record, merge_thresholds(THRESHOLDS, {}), None, [NDR])
    assert check["status"] == status, check["message"]
    assert words in check["message"]


def test_bad_reference_rows_and_benchmark_choice_fail_preflight():
    errors = preflight_errors(
        ["nccl"],
        {},
        [],
        ["a"],
        references=[dict(H200_ROWS[0], nvls="yes", min_bytes=1 << 40)],
        rdma_bw_references=[{"rate_gbps": "fast", "bw_gbps": 0}, "NDR"],
        nccl_benchmarks="both",
    )
    joined = "\n".join(errors)
    for text in (
        "fabric_validate_busbw_references[0].nvls='yes' must be true",
        "fabric_validate_busbw_references[0].min_bytes=1099511627776 must be a whole number of bytes from 1",
        "fabric_validate_rdma_bw_references[0].rate_gbps='fast' must be a number greater than 0",
        "fabric_validate_rdma_bw_references[0].bw_gbps=0",
        "fabric_validate_rdma_bw_references[0].source is missing",
        "fabric_validate_rdma_bw_references[1]='NDR' is not a mapping",
        "fabric_validate_nccl_benchmarks='both' must be one of first, all",
    ):
        assert text in joined, text


SIDE_BY_SIDE = FIXTURES / "nccl-h200-side-by-side"


def test_real_h200_run_of_both_benchmarks_is_judged_again_the_same():
    """The report of tests/lab/device/run_h200.sh on the one-GPU H200 machine (2026-12-02): nccl-tests 2.19.6 and the
    PyTorch benchmark side by side, NCCL 2.28.9 with NCCL_DEBUG=INFO, NVLS off. Judging its recorded host data again
    gives the same checks; both benchmarks are skipped for one rank, the data path for the lack of an RDMA NIC."""
    import json

    report = json.loads((SIDE_BY_SIDE / "fabric_validate-report.json").read_text())
    host = report["hosts"]["localhost"]
    assert [r["tool"] for r in host["nccl"]] == ["nccl-tests", "pytorch"]
    assert host["nccl"][0]["output"] == (SIDE_BY_SIDE / "all_reduce_perf-info.txt").read_text()
    assert host["nccl"][1]["output"] == (SIDE_BY_SIDE / "nccl_allreduce_torch-info.txt").read_text()
    config = {"tiers": report["tiers"], "thresholds": report["thresholds"], "references": report["busbw_references"]}
    assert evaluate(report["hosts"], config)["checks"] == report["checks"]
    checks = {c["check"]: c for c in report["checks"]}
    for tool in ("nccl-tests", "pytorch"):
        assert checks[f"nccl.all_reduce[{tool}]"]["status"] == "skipped"
        assert "1 rank: bus bandwidth is 0 by definition" in checks[f"nccl.all_reduce[{tool}]"]["message"]
    assert "NCCL listed no RDMA NIC (network Socket)" in checks["nccl.data_path"]["message"]
    # The versions the fleet check compares were recorded: the kernel, the GPU driver, the packages asked for.
    assert host["versions"]["kernel"] and host["gpu"]["gpus"][0]["driver_version"] == "580.159.04"
    assert set(host["versions"]["packages"]) >= {"libnccl2", "rdma-core", "perftest"}


@pytest.mark.parametrize("name", ["all_reduce_perf-info.txt", "nccl_allreduce_torch-info.txt"])
def test_real_info_lines_of_both_benchmarks(name):
    text = (SIDE_BY_SIDE / name).read_text()
    info = parse_nccl_info(text)
    assert (info["version"], info["network"], info["nics"], info["nvls"]) == ("2.28.9+cuda13.0", "Socket", {}, None)
    # NCCL_NVLS_ENABLE=0 was in the run's environment: NCCL printed no NVLS line, the environment says off.
    assert nvls_used(info, {"NCCL_NVLS_ENABLE": "0"}) is False
    parsed = parse_nccl_tests(text)
    assert parsed["ok"] and parsed["nranks"] == 1 and parsed["largest"]["size"] == 17179869184


def test_sm_query_host_must_be_in_the_inventory_or_the_host_itself():
    assert preflight_errors([], {}, [], ["a"], sm_query_host="a", inventory_hosts=["a", "b"]) == []
    errors = preflight_errors([], {}, [], ["a"], sm_query_host="sm-99", inventory_hosts=["a", "b"])
    assert errors == ["fabric_validate_sm_query_host=sm-99 is not an inventory host; name one, or leave it unset"]
