# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The fabric validation plot (PNG, matplotlib's Agg backend), drawn by module fabric_report_plot and by action
fabric_validate_report on the controller. matplotlib is imported only when drawing: it is a controller requirement.
"""

import filecmp
import os
import tempfile

MATPLOTLIB_MISSING = "matplotlib is required on the controller for the report plot: pip install matplotlib"


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def plot_panels(series):
    """Panels that have data (nccl, rdma); a panel without data says so in the image."""
    return [name for name in ("nccl", "rdma") if series.get(name)]


def draw_plot(series, title, path):
    """Draw ``series`` into the PNG ``path``; whether the file changed (the same data gives the same bytes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_nccl, ax_rdma) = plt.subplots(1, 2, figsize=(13, 5))
    fig.suptitle(title)
    nccl = series.get("nccl") or {}
    for index, (host, rows) in enumerate(sorted(nccl.items())):
        sizes = [r["size"] for r in rows]
        color = f"C{index % 10}"
        ax_nccl.plot(sizes, [r["busbw_gbps"] or 0 for r in rows], marker="o", color=color, label=f"{host} busbw")
        ax_nccl.plot(sizes, [r["algbw_gbps"] or 0 for r in rows], linestyle="--", color=color, label=f"{host} algbw")
    ax_nccl.set_xscale("log", base=2)
    ax_nccl.set_xlabel("message size (bytes)")
    ax_nccl.set_ylabel("GB/s (out-of-place)")
    ax_nccl.set_title("NCCL all_reduce_perf")
    if nccl:
        ax_nccl.legend(fontsize="small")
    else:
        ax_nccl.text(0.5, 0.5, "no NCCL measurement", ha="center", va="center", transform=ax_nccl.transAxes)
    rdma = series.get("rdma") or {}
    labels = [f"{host}\n-> {r['peer']}" for host, runs in sorted(rdma.items()) for r in runs]
    values = [r["bw_avg_gbps"] for _host, runs in sorted(rdma.items()) for r in runs]
    ax_rdma.bar(range(len(values)), values)
    ax_rdma.set_xticks(range(len(values)))
    ax_rdma.set_xticklabels(labels, fontsize="small")
    ax_rdma.set_ylabel("Gb/s")
    ax_rdma.set_title("ib_write_bw average per pair")
    if not values:
        ax_rdma.text(0.5, 0.5, "no RDMA measurement", ha="center", va="center", transform=ax_rdma.transAxes)
    fig.tight_layout()
    directory = os.path.dirname(path) or "."
    handle, tmp = tempfile.mkstemp(suffix=".png", dir=directory)
    os.close(handle)
    # No timestamp in the PNG metadata, so the same data gives the same bytes and a re-run changes nothing.
    fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    if os.path.exists(path) and filecmp.cmp(tmp, path, shallow=False):
        os.unlink(tmp)
        return False
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return True
