#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: node_apply
short_description: Run several of the collection's applier modules in one call on the host
description:
  - Runs, in one call on the host and in the order given, the applier modules of the roles of one play, each with its
    own module's code and argument spec - M(gpucluster.fabric.rdma_core), M(gpucluster.fabric.rdma_modules),
    M(gpucluster.fabric.hca_firmware), M(gpucluster.fabric.cuda_repo), M(gpucluster.fabric.nccl),
    M(gpucluster.fabric.fabric_interfaces), M(gpucluster.fabric.roce_qos) and M(gpucluster.fabric.opensm).
  - Each step's result is what its module returns; a step that fails stops the steps after it, each of which says so.
  - Action M(gpucluster.fabric.apply) calls it with each role's arguments; it is not meant for a task of its own.
version_added: 0.2.0
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.posix
options:
  steps:
    description: The modules to run, in order.
    type: list
    elements: dict
    required: true
    suboptions:
      module:
        description: The module, by its fully qualified name.
        type: str
        required: true
        choices:
          - gpucluster.fabric.cuda_repo
          - gpucluster.fabric.fabric_interfaces
          - gpucluster.fabric.hca_firmware
          - gpucluster.fabric.nccl
          - gpucluster.fabric.opensm
          - gpucluster.fabric.rdma_core
          - gpucluster.fabric.rdma_modules
          - gpucluster.fabric.roce_qos
      args:
        description: The module's arguments, validated against its own argument spec.
        type: dict
        default: {}
      inputs:
        description:
          - "Arguments taken from the result of an earlier step, C({argument: [module, key]}); the value in
            O(steps[].args) stays where that result has no such key."
        type: dict
        default: {}
attributes:
  check_mode:
    support: full
    details: Each step reports the changes a run would make, each with its reason, and changes nothing.
  diff_mode:
    support: full
    details: The diffs of every step, in order.
"""

EXAMPLES = r"""
- name: Two appliers in one call (what action gpucluster.fabric.apply builds from the roles' own tasks)
  gpucluster.fabric.node_apply:
    steps:
      - module: gpucluster.fabric.rdma_core
        args: {host: gpu1, os_family: Debian, packages: [rdma-core]}
      - module: gpucluster.fabric.rdma_modules
        args: {host: gpu1, core_modules: [ib_core, ib_uverbs]}
"""

RETURN = r"""
results:
  description: Each step's result, in the order of O(steps), as its module returns it (C(failed), C(msg) if it failed).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.concerns import appliers  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.host_checks import run_steps, steps_argument_spec  # noqa: E402


def main():
    steps = appliers()
    module = AnsibleModule(
        argument_spec=steps_argument_spec(steps),
        supports_check_mode=True,
    )
    results = run_steps(
        module, ArgumentSpecValidator, module.params["steps"], steps, runner="node_apply", stop_on_failure=True
    )
    failed = [result for result in results if result.get("failed")]
    diff = [entry for result in results for entry in _as_list(result.get("diff"))]
    outcome = {"changed": any(result.get("changed") for result in results), "results": results}
    if module._diff:
        outcome["diff"] = diff
    if failed:
        module.fail_json(msg=failed[0].get("msg") or "a step failed", **outcome)
    module.exit_json(**outcome)


def _as_list(diff):
    if not diff:
        return []
    return list(diff) if isinstance(diff, (list, tuple)) else [diff]


if __name__ == "__main__":
    main()
