# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The fabric validation figures (PNG, matplotlib's Agg backend), drawn by module fabric_report_plot and by action
fabric_validate_report on the controller.

- heatmap.png: every host against every check, coloured passed / failed / skipped, drawn on every run;
- plot.png: the bandwidth panels that have measurements (NCCL busbw by message size, ib_write_bw per pair), each
  with its threshold drawn; not drawn when nothing was measured.

matplotlib is imported only when drawing. Without it validation still writes its report and says why the figures are
missing (``figures_note``); only module fabric_report_plot, whose one job is the picture, fails.
"""

import filecmp
import os
import re
import sys
import tempfile

MATPLOTLIB_MISSING = "matplotlib is required on the controller for the report plot: pip install matplotlib"
# Worst first: a column that holds several checks of one host (ib_write_bw to two peers) shows the worst of them.
STATUS_ORDER = ("failed", "passed", "skipped")
STATUS_COLOURS = {"failed": "#d62728", "passed": "#2ca02c", "skipped": "#bdbdbd", None: "#ffffff"}
# RDMA performance checks are named after the peer (ib_write_bw[vm2]); one column per test, not per peer.
_PEER_CHECK = re.compile(r"^(ib_\w+)\[[^\]]*\]$")


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def figures_note():
    """Why the report has no figures, and how to get them, when matplotlib is missing."""
    return (
        f"figures not drawn: matplotlib is not installed for the controller's Python ({sys.executable}); "
        "install it there (the collection's meta/ee-requirements.txt pins the version its execution environment "
        "uses). The checks and their verdicts are complete without it."
    )


def plot_panels(series):
    """The bandwidth panels that have data, in drawing order (nccl, rdma)."""
    return [name for name in ("nccl", "rdma") if (series or {}).get(name)]


def heatmap_column(check):
    """The heat map column of a check name: RDMA performance checks lose their peer."""
    match = _PEER_CHECK.match(check)
    return match.group(1) if match else check


def heatmap_grid(checks):
    """{hosts, columns, cells}: hosts and columns in first-seen order, cells[host][column] the worst status."""
    hosts, columns, cells = [], [], {}
    for check in checks or []:
        host, column, status = check["host"], heatmap_column(check["check"]), check["status"]
        if host not in cells:
            hosts.append(host)
            cells[host] = {}
        if column not in columns:
            columns.append(column)
        known = cells[host].get(column)
        if known is None or STATUS_ORDER.index(status) < STATUS_ORDER.index(known):
            cells[host][column] = status
    return {"hosts": hosts, "columns": columns, "cells": cells}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, path):
    """Write ``fig`` to the PNG ``path``; whether the file changed (the same data gives the same bytes)."""
    directory = os.path.dirname(path) or "."
    handle, tmp = tempfile.mkstemp(suffix=".png", dir=directory)
    os.close(handle)
    # No timestamp in the PNG metadata, so the same data gives the same bytes and a re-run changes nothing.
    fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None}, bbox_inches="tight")
    plt.close(fig)
    if os.path.exists(path) and filecmp.cmp(tmp, path, shallow=False):
        os.unlink(tmp)
        return False
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return True


def draw_heatmap(grid, title, path):
    """Hosts (rows) x checks (columns), one coloured cell each; a blank cell is a check that host did not run."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    plt = _pyplot()
    hosts, columns = grid["hosts"], grid["columns"]
    codes = {status: index for index, status in enumerate((None, *STATUS_ORDER))}
    matrix = [[codes[grid["cells"][host].get(column)] for column in columns] for host in hosts]
    width = min(4 + 0.32 * len(columns), 60)
    height = min(2.5 + 0.28 * len(hosts), 120)
    fig, ax = plt.subplots(figsize=(width, height))
    cmap = ListedColormap([STATUS_COLOURS[s] for s in (None, *STATUS_ORDER)])
    ax.imshow(matrix or [[0]], cmap=cmap, vmin=-0.5, vmax=len(codes) - 0.5, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(columns)))
    ax.set_xticklabels(columns, rotation=90, fontsize="small")
    ax.set_yticks(range(len(hosts)))
    ax.set_yticklabels(hosts, fontsize="small")
    ax.set_xticks([x - 0.5 for x in range(1, len(columns))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(hosts))], minor=True)
    ax.grid(which="minor", color="white", linewidth=1)
    ax.tick_params(which="minor", length=0)
    counts = {s: sum(row.count(codes[s]) for row in matrix) for s in STATUS_ORDER}
    ax.set_title(f"{title}: {len(hosts)} hosts x {len(columns)} checks")
    legend = [Patch(color=STATUS_COLOURS[s], label=f"{s} ({counts[s]})") for s in STATUS_ORDER]
    legend.append(Patch(facecolor=STATUS_COLOURS[None], edgecolor="#999999", label="not run on that host"))
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    fig.tight_layout()
    return _save(plt, fig, path)


def _draw_nccl(ax, series):
    thresholds = (series.get("thresholds") or {}).get("nccl") or {}
    for index, (host, rows) in enumerate(sorted(series["nccl"].items())):
        sizes = [r["size"] for r in rows]
        color = f"C{index % 10}"
        ax.plot(sizes, [r["busbw_gbps"] or 0 for r in rows], marker="o", color=color, label=f"{host} busbw")
        ax.plot(sizes, [r["algbw_gbps"] or 0 for r in rows], linestyle="--", color=color, label=f"{host} algbw")
        limit = thresholds.get(host)
        if limit:
            ax.axhline(limit, color=color, linestyle=":", label=f"{host} threshold {limit} GB/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("GB/s (out-of-place)")
    ax.set_title("NCCL all_reduce_perf")
    ax.legend(fontsize="small")


def _draw_rdma(ax, series):
    thresholds = (series.get("thresholds") or {}).get("rdma") or {}
    pairs = [(host, run) for host, runs in sorted(series["rdma"].items()) for run in runs]
    ax.bar(range(len(pairs)), [run["bw_avg_gbps"] for _host, run in pairs], color="C0", label="ib_write_bw average")
    marked = False
    for index, (host, run) in enumerate(pairs):
        limit = (thresholds.get(host) or {}).get(str(run["peer"]))
        if limit is not None:
            ax.hlines(limit, index - 0.4, index + 0.4, colors="C3", label=None if marked else "threshold")
            marked = True
    ax.set_xticks(range(len(pairs)))
    ax.set_xticklabels([f"{host}\n-> {run['peer']}" for host, run in pairs], fontsize="small")
    ax.set_ylabel("Gb/s")
    ax.set_title("ib_write_bw average per pair")
    ax.legend(fontsize="small")


def draw_plot(series, title, path):
    """Draw the panels of ``series`` that have data into the PNG ``path``; whether the file changed.

    Call only when plot_panels(series) is not empty: a figure of empty panels tells a reader nothing.
    """
    panels = plot_panels(series)
    if not panels:
        raise ValueError("draw_plot: no NCCL or RDMA measurement to draw")
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 5), squeeze=False)
    fig.suptitle(title)
    for ax, panel in zip(axes[0], panels):
        (_draw_nccl if panel == "nccl" else _draw_rdma)(ax, series)
    fig.tight_layout()
    return _save(plt, fig, path)
