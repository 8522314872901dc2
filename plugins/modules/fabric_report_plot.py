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
author: gpucluster.fabric maintainers (@gpucluster)
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
    changed = True
    if not module.check_mode:
        changed = draw_plot(series, module.params["title"], module.params["path"])
    module.exit_json(changed=changed, path=module.params["path"], panels=plot_panels(series))


if __name__ == "__main__":
    main()
