#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: fabric_report_plot
short_description: Draw the fabric validation plot (PNG)
description:
  - Draws NCCL bus bandwidth (and algorithm bandwidth) by message size per host, and RDMA bandwidth per host as bars,
    into one PNG file, with matplotlib's Agg backend (no display needed). Only panels with data are drawn, each with
    its thresholds when O(series) has them; with no data at all nothing is written.
  - Role fabric_validate does not need this module (its report action draws the same figure and a hosts x checks
    heat map); it is for playbooks that plot measurements of their own.
  - Meant to run on the controller (delegated to localhost) from role fabric_validate; the data comes from the
    C(gpucluster.fabric.fabric_plot_series) filter.
  - Fails with a clear message when matplotlib is not installed on the Python that runs it.
version_added: 0.1.0
author: gpucluster.fabric maintainers (@gpucluster)
requirements:
  - matplotlib
options:
  path:
    description: PNG file to write.
    type: path
    required: true
  series:
    description:
      - C(nccl) {host - [{size, busbw_gbps, algbw_gbps}]} and C(rdma) {host - [{peer, bw_avg_gbps}]}, as the
        P(gpucluster.fabric.fabric_plot_series#filter) filter returns them.
      - Optional C(thresholds), C(nccl) {host - GB/s} and C(rdma) {host - {peer - Gb/s}}, drawn as lines.
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
  description: Panels drawn (nccl, rdma), only those with data; empty when nothing was written.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.report_plot import (  # noqa: E402
    MATPLOTLIB_MISSING,
    draw_plot,
    have_matplotlib,
    plot_panels,
)


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "series": {"type": "dict", "required": True},
            "title": {"type": "str", "default": "Fabric validation"},
        },
        supports_check_mode=True,
    )
    if not have_matplotlib():
        module.fail_json(msg=MATPLOTLIB_MISSING)
    series = module.params["series"]
    panels = plot_panels(series)
    if not panels:
        module.exit_json(changed=False, path=module.params["path"], panels=[], msg="nothing measured: no plot written")
    changed = True
    if not module.check_mode:
        changed = draw_plot(series, module.params["title"], module.params["path"])
    module.exit_json(changed=changed, path=module.params["path"], panels=panels)


if __name__ == "__main__":
    main()
