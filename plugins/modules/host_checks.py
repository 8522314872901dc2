#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: host_checks
short_description: Run the host-side checks of several of the collection's modules in one call
description:
  - Runs, in one call on the host and in the order given, the checks the site preflight (action
    M(gpucluster.fabric.preflight)) makes there, each with its own module's code and argument spec -
    M(gpucluster.fabric.rdma_modules), M(gpucluster.fabric.nccl) and M(gpucluster.fabric.hca_firmware) with
    O(steps[].args) C(state=checked),
    M(gpucluster.fabric.cuda_repo_probe) without C(install), and M(gpucluster.fabric.fabric_link_info).
  - Each step's result is what its module returns; a step that fails does not stop the steps after it, and a step
    whose arguments would change the host is refused.
  - The preflight calls it once per host instead of once per module, so that the checks cost one remote call.
version_added: 0.2.0
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.info_module
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
          - gpucluster.fabric.cuda_repo_probe
          - gpucluster.fabric.fabric_link_info
          - gpucluster.fabric.hca_firmware
          - gpucluster.fabric.nccl
          - gpucluster.fabric.rdma_modules
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
"""

EXAMPLES = r"""
- name: Read the CUDA repository's offered NCCL builds, then check NCCL against them, in one call
  gpucluster.fabric.host_checks:
    steps:
      - module: gpucluster.fabric.cuda_repo_probe
        args:
          base_url: https://mirror.example/cuda/repos/debian12/x86_64
          key_fingerprint: EB693B3035CD5710E231E123A4B469963BF863CC
          offered_nccl: always
      - module: gpucluster.fabric.nccl
        args: {state: checked, nccl_version: "2.21.5", cuda_version: "12.4", before_repository: true}
        inputs: {offered_index: [gpucluster.fabric.cuda_repo_probe, offered_nccl]}
  register: checked
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
from ansible_collections.gpucluster.fabric.plugins.module_utils.host_checks import (  # noqa: E402
    STEPS,
    run_steps,
    steps_argument_spec,
)


def main():
    module = AnsibleModule(
        argument_spec=steps_argument_spec(STEPS),
        supports_check_mode=True,
    )
    module.exit_json(changed=False, results=run_steps(module, ArgumentSpecValidator, module.params["steps"]))


if __name__ == "__main__":
    main()
