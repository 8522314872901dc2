#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: fabric_report_plot
short_description: Draw the fabric validation plot (PNG)
description:
  - Draws NCCL bus bandwidth (and algorithm bandwidth) by message size per host, and RDMA bandwidth per host as bars,
    into one PNG file, with matplotlib's Agg backend (no display needed).
  - Meant to run on the controller (delegated to localhost) from role fabric_validate; the data comes from the
    C(gpucluster.fabric.fabric_plot_series) filter.
  - Fails with a clear message when matplotlib is not installed on the Python that runs it.
version_added: 0.1.0
author: gpucluster.fabric maintainers (!UNKNOWN)
requirements:
  - matplotlib
options:
  path:
    description: PNG file to write.
    type: path
    required: true
  series:
    description: C(nccl) {host - [{size, busbw_gbps, algbw_gbps}]} and C(rdma) {host - [{peer, bw_avg_gbps}]}.
    type: dict
    required: true
  title:
    description: Figure title.
    type: str
    default: Fabric validation
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Plot
  gpucluster.fabric.fabric_report_plot:
    path: /tmp/report/plot.png
    series: "{{ per_host | gpucluster.fabric.fabric_plot_series }}"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
path:
  description: The file written.
  returned: always
  type: str
panels:
  description: Panels drawn (nccl, rdma); a panel without data says so in the image.
  returned: always
  type: list
  elements: str
"""

import filecmp  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def _draw(series, title, path):
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


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "series": {"type": "dict", "required": True},
            "title": {"type": "str", "default": "Fabric validation"},
        },
        supports_check_mode=True,
    )
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        module.fail_json(msg="matplotlib is required on the controller for the report plot: pip install matplotlib")
    series = module.params["series"]
    panels = [name for name in ("nccl", "rdma") if series.get(name)]
    changed = True
    if not module.check_mode:
        changed = _draw(series, module.params["title"], module.params["path"])
    module.exit_json(changed=changed, path=module.params["path"], panels=panels)


if __name__ == "__main__":
    main()
