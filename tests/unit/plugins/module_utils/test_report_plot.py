"""The report's figures: the hosts x checks grid, the plot's thresholds, and PNGs that only show what was measured."""

from pathlib import Path

import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_checks import plot_series
from ansible_collections.gpucluster.fabric.plugins.module_utils.report_plot import (
    draw_heatmap,
    draw_plot,
    heatmap_column,
    heatmap_grid,
    plot_panels,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
PNG = b"\x89PNG\r\n\x1a\n"


def _check(host, check, status, threshold=None):
    return {"host": host, "tier": "t", "check": check, "status": status, "threshold": threshold}


def test_rdma_checks_share_a_column_and_show_the_worst_status():
    assert heatmap_column("ib_write_bw[vm2]") == "ib_write_bw"
    assert heatmap_column("port.state[rxe0/1]") == "port.state[rxe0/1]"
    grid = heatmap_grid(
        [
            _check("a", "port.state[rxe0/1]", "passed"),
            _check("a", "ib_write_bw[b]", "passed"),
            _check("a", "ib_write_bw[c]", "failed"),
            _check("a", "ib_write_bw[d]", "skipped"),
            _check("b", "ib_write_bw[a]", "skipped"),
            _check("b", "module[ib_core]", "failed"),
            _check("fleet", "unreached", "failed"),
        ]
    )
    assert grid["hosts"] == ["a", "b", "fleet"]
    assert grid["columns"] == ["port.state[rxe0/1]", "ib_write_bw", "module[ib_core]", "unreached"]
    assert grid["cells"]["a"] == {"port.state[rxe0/1]": "passed", "ib_write_bw": "failed"}
    assert grid["cells"]["b"] == {"ib_write_bw": "skipped", "module[ib_core]": "failed"}
    assert heatmap_grid([]) == {"hosts": [], "columns": [], "cells": {}}


def _hosts():
    return {
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


def test_plot_series_carries_the_thresholds_of_judged_checks():
    checks = [
        _check("vm1", "ib_write_bw[vm2]", "passed", 0.125),
        _check("h200", "nccl.all_reduce[pytorch]", "failed", 431.0),
        _check("vm1", "ib_write_lat[vm2]", "passed", 2.5),
        _check("h200", "port.rate[mlx5_0/1]", "skipped", 400),
    ]
    series = plot_series(_hosts(), checks)
    assert series["thresholds"] == {"nccl": {"h200": 431.0}, "rdma": {"vm1": {"vm2": 0.125}}}
    assert "thresholds" not in plot_series(_hosts())
    # A skipped check judged nothing: no line is drawn for it.
    skipped = plot_series(_hosts(), [_check("h200", "nccl.all_reduce[nccl-tests]", "skipped", 431.0)])
    assert skipped["thresholds"] == {"nccl": {}, "rdma": {}}


def test_a_one_rank_all_reduce_is_not_drawn_as_bandwidth():
    """One rank reduces with nobody: its algbw (239,468 GB/s at 8 GiB on one H200, PyTorch's benchmark) is a no-op
    timed, and drawn it would flatten every other line. It is left out, saying why."""
    one = (FIXTURES / "nccl-torch-h200" / "nccl_allreduce_torch-h200-1gpu.txt").read_text()
    series = plot_series({"h200-1": {"nccl": {"output": one}}, **_hosts()})
    assert sorted(series["nccl"]) == ["h200"]
    assert series["left_out"] == ["h200-1: 1 rank, no data moves between GPUs: not drawn"]
    assert max(point["algbw_gbps"] for point in series["nccl"]["h200"]) < 1000


def test_only_panels_with_data_are_drawn(tmp_path):
    pytest.importorskip("matplotlib")
    hosts = _hosts()
    rdma_only = plot_series({"vm1": hosts["vm1"]}, [_check("vm1", "ib_write_bw[vm2]", "passed", 0.125)])
    assert plot_panels(rdma_only) == ["rdma"]
    target = tmp_path / "plot.png"
    assert draw_plot(rdma_only, "t", str(target)) is True
    assert target.read_bytes()[:8] == PNG
    assert draw_plot(rdma_only, "t", str(target)) is False, "the same data must give the same bytes"
    both = plot_series(hosts)
    assert plot_panels(both) == ["nccl", "rdma"]
    with pytest.raises(ValueError, match="no NCCL or RDMA measurement"):
        draw_plot({"nccl": {}, "rdma": {}}, "t", str(tmp_path / "empty.png"))
    assert not (tmp_path / "empty.png").exists()


def test_heatmap_png_is_deterministic_and_scales(tmp_path):
    pytest.importorskip("matplotlib")
    checks = [
        _check(f"gpu-{h:02d}", f"c{c}", ("passed", "failed", "skipped")[(h + c) % 3])
        for h in range(33)
        for c in range(20)
    ]
    target = tmp_path / "heatmap.png"
    assert draw_heatmap(heatmap_grid(checks), "fleet", str(target)) is True
    assert target.read_bytes()[:8] == PNG
    assert draw_heatmap(heatmap_grid(checks), "fleet", str(target)) is False
    checks[0]["status"] = "failed" if checks[0]["status"] != "failed" else "passed"
    assert draw_heatmap(heatmap_grid(checks), "fleet", str(target)) is True
