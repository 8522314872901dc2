# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
# The documentation of action plugin fabric_validate_report (plugins/action/fabric_validate_report.py), which runs
# on the controller only; this file is where ansible-doc looks for it.
DOCUMENTATION = r"""
module: fabric_validate_report
short_description: Judge the fabric validation results and write the report on the controller
description:
  - Evaluates every host's collected data against the thresholds (the checks of the selected tiers, fleet outliers,
    hosts of the play that were not reached) and writes one directory per run, C(<report_dir>/<run_id>), holding
    C(report.json), C(junit.xml) (written with Python's ElementTree, valid XML for any message), C(summary.md)
    (from the C(summary.md.j2) template in O(templates), rendered by Ansible's templar with the variable C(report),
    the content of C(report.json)), C(heatmap.png) (every host against every check, passed, failed or skipped) and,
    when an RDMA or NCCL measurement was made, C(plot.png) (the measurements with the thresholds that judged them).
  - Without matplotlib on the controller the figures are left out, the report (C(figures.note)) and the summary line
    say why, and the run is not failed for it.
  - Meant for role fabric_validate with C(run_once). Runs on the controller only and reports no change (the report is
    the run's output, not state on the hosts). In check mode nothing is written.
  - The run's outcome is also returned as custom statistics (what M(ansible.builtin.set_stats) sets), under the key
    C(fabric_validate) - run_id, run_dir, files, summary and failures - so that AWX/AAP keeps it as the job's
    artifacts, which outlive the execution environment the report directory was written in.
version_added: 0.2.0
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.controller
attributes:
  check_mode:
    support: full
    details: In check mode the hosts are judged and the result returned, and no file is written.
  diff_mode:
    support: none
requirements:
  - matplotlib (on the controller, optional, for the figures)
options:
  run_id:
    description: Name of the run's directory.
    type: str
    required: true
  report_dir:
    description:
      - Directory on the controller below which the run's directory is written. A relative path is relative to the
        directory ansible-playbook runs in (the controller's working directory), never to a playbook or collection.
    type: path
    required: true
  templates:
    description: Directory holding C(summary.md.j2).
    type: path
    required: true
  tiers:
    description: Tiers to judge (health, rdma, nccl, outliers).
    type: list
    elements: str
    default: []
  thresholds:
    description: Threshold table, C({name - {value, unit, source}}).
    type: dict
    default: {}
  threshold_overrides:
    description: Site values for thresholds (plain numbers); marked C(site override) in the report.
    type: dict
    default: {}
  busbw_references:
    description: all_reduce_perf bus bandwidth references by GPU model, GPU count and NVLS use.
    type: list
    elements: dict
    default: []
  rdma_bw_references:
    description: ib_write_bw references by port speed.
    type: list
    elements: dict
    default: []
  expected:
    description: Health expectations, C({rate_gbps, active_mtu}).
    type: dict
    default: {}
  rdma_device:
    description: RDMA device perftest used (empty - the first ACTIVE port's device).
    type: str
    default: ""
  hosts:
    description:
      - Each host's record, C({host - record}); or a list of host names, whose records are read from their
        variables - the C(__fabric_validate_host) that role fabric_validate's measured tiers kept, else the
        C(record) that M(gpucluster.fabric.fabric_validate_collect) returned (registered as
        C(__fabric_validate_collected)) with the sminfo answers (C(__fabric_validate_sminfo)).
    type: raw
    required: true
  unreached:
    description: Hosts of the play that were not validated; each gets a failed C(host.reached) check.
    type: list
    elements: str
    default: []
  subnet_managers:
    description:
      - The results of a loop that ran each subnet manager's node check (C(gpucluster-fabric-check --json -)), with
        the subnet manager as C(item), when O(hosts) is a list - role fabric_validate runs it delegated where the play
        does not run on the subnet managers. Each becomes that host's record, judged as the fleet check judges a node;
        its failed checks fail every host of the play, as the fleet's do.
    type: list
    elements: dict
    default: []
"""

EXAMPLES = r"""
- name: Judge every host and write the report
  gpucluster.fabric.fabric_validate_report:
    run_id: "{{ fabric_validate_run_id }}"
    report_dir: "{{ fabric_validate_report_dir }}"
    templates: "{{ role_path }}/../../templates/fabric_validate"
    tiers: "{{ fabric_validate_tiers }}"
    thresholds: "{{ fabric_validate_thresholds }}"
    hosts: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'collected'))) }}"
  run_once: true
  register: report
"""

RETURN = r"""
msg:
  description:
    - One line - the counts of passed, failed and skipped checks and the run's directory. In check mode it says that
      the hosts were read as they are, that failures are reported, not enforced, and that nothing was written.
  type: str
  returned: always
  sample: "fabric_validate 20261201T120000Z: 12 passed, 0 failed, 3 skipped; report in /srv/reports/20261201T120000Z"
run_id:
  description: The run's name.
  type: str
  returned: always
run_dir:
  description: The run's directory.
  type: str
  returned: always
files:
  description: The files of the report (written unless in check mode).
  type: list
  elements: str
  returned: always
summary:
  description: Number of passed, failed, skipped and all checks.
  type: dict
  returned: always
  sample: {passed: 12, failed: 1, skipped: 3, total: 16}
checks:
  description: Every check - host, tier, check, status, measured, threshold, unit, message.
  type: list
  elements: dict
  returned: always
failures:
  description: For each host, one line per failed check of its own or of the fleet.
  type: dict
  returned: always
"""
