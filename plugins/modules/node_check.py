#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: node_check
short_description: Install the node check, its configuration and its systemd timer, changing only what differs
version_added: 0.2.0
description:
  - Installs the node's own fabric check, C(/usr/local/sbin/gpucluster-fabric-check), which judges the host's intent
    (C(/etc/gpucluster/fabric.json), written by M(gpucluster.fabric.fabric_intent)) against its live state with the
    collection's own rules - each applier run in check mode (drift), and the health tier of role
    C(gpucluster.fabric.fabric_validate) - and writes a JSON report, metrics for node_exporter's textfile collector
    and a one-line reason. Python 3 standard library only; no Ansible on the node.
  - The code installed under C(/usr/local/lib/gpucluster-fabric/gpucluster_fabric_check/) is the code this module
    was shipped with (its C(module_utils)), so the node judges with exactly the rules the collection applied.
  - Writes the check's configuration C(/etc/gpucluster/fabric-check.json) (mode C(0600)), the oneshot service and
    the timer C(gpucluster-fabric-check.timer) (every O(interval) seconds), each only where it differs; reloads
    systemd only when a unit changed and enables and starts the timer only when it is not (O(timer)).
  - Nothing runs the check itself; the timer, Slurm or a person does (C(docs/health.md)).
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.posix
  - gpucluster.fabric.applier
options:
  interval:
    description: Seconds between two runs of the timer (10 to 86400).
    type: int
    default: 300
  timer:
    description: Whether the timer is enabled and started (V(false) disables and stops it; the files stay).
    type: bool
    default: true
  only:
    description:
      - Check names to judge (fnmatch patterns over names such as C(drift.nccl) or C(port.state[mlx5_0/1]), or a
        family such as C(port.state)); empty judges every check. The others are reported C(skipped).
    type: list
    elements: str
    default: []
  skip:
    description: Check names (patterns as for O(only)) reported C(skipped) instead of judged.
    type: list
    elements: str
    default: []
  textfile_dir:
    description: node_exporter's textfile collector directory, where C(gpucluster_fabric.prom) is written.
    type: path
    default: /var/lib/prometheus/node-exporter
  report:
    description: Where each run's JSON report is written (mode C(0600)).
    type: path
    default: /var/lib/gpucluster/fabric-check.json
  slurm:
    description:
      - >-
        Drain the node in Slurm (C(scontrol update state=drain reason="fabric: <check>: <detail>")) when a check of
        its own fails for O(slurm_drain_after) runs in a row that outlast one O(interval), and resume it after
        O(slurm_resume_after) clean runs - only a drain of its own, while Slurm still holds its reason, never one an
        operator or another check made, never a node DOWN, FAILed, in MAINT or rebooting; faults of the fabric as a
        whole (the subnet manager, the partitions) drain nobody. Slurm runs the check as C(HealthCheckProgram), the
        timer too (docs/health.md).
    type: bool
    default: false
  slurm_node:
    description: The node's name in Slurm; empty means the host's short name.
    type: str
    default: ""
  slurm_drain_after:
    description: Failing runs in a row (which together outlast one O(interval)) before the node is drained.
    type: int
    default: 2
  slurm_resume_after:
    description: Clean runs in a row before the node's own drain is resumed.
    type: int
    default: 2
  slurm_max_drained:
    description:
      - >-
        The breaker: no new drain while this many of the node's partition's nodes are drained by the check - below 1
        a share of the partition (at least one node), from 1 on a count.
    type: float
    default: 0.1
"""

EXAMPLES = r"""
- name: Check the node's fabric every five minutes
  gpucluster.fabric.node_check:
    interval: 300
    skip: [gpu.nic_affinity]
"""

RETURN = r"""
command:
  description: The node check's command on the host.
  type: str
  returned: always
  sample: /usr/local/sbin/gpucluster-fabric-check
unit:
  description: The timer that runs it.
  type: str
  returned: always
  sample: gpucluster-fabric-check.timer
files:
  description: The code files installed.
  type: list
  elements: str
  returned: when state is present
changes:
  description: Each change made (or that would be made in check mode), C({what, why}).
  type: list
  elements: dict
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.node_check_install import (  # noqa: E402
    ARGUMENT_SPEC,
    run,
)


def main():
    run(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True))


if __name__ == "__main__":
    main()
