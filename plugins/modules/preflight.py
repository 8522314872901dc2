# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
# The documentation of action plugin preflight (plugins/action/preflight.py), which runs on the controller and calls
# read-only modules on the host; this file is where ansible-doc looks for it.

DOCUMENTATION = r"""
module: preflight
version_added: 0.2.0
short_description: Check a host for the collection's roles in one task and report every problem at once
description:
  - The check of C(gpucluster.fabric.preflight), which site.yml runs before any host changes, and the same code that
    M(gpucluster.fabric.apply) (each role's applier task) and role C(fabric_validate) run for their own role in a
    play of your own.
  - Gathers the minimal facts when the host has none (and returns them, so that later plays need not gather them).
  - With O(unknown_vars), refuses inventory variables with the collection's prefixes that no role declares, as
    M(gpucluster.fabric.declared_vars) does.
  - With O(argument_specs), checks the host's values against each role's argument spec, the spec's defaults left
    out, so that the inventory's values are judged.
  - Runs each role's own input checks, with the host's variables as the role's tasks see them (role defaults, the
    host's variables, the role's vars). Those that need the host run the role's own modules read-only with the
    arguments the registry of concerns makes from the role's variables - M(gpucluster.fabric.rdma_modules) and
    M(gpucluster.fabric.nccl) with O(gpucluster.fabric.nccl#module:state=checked), M(gpucluster.fabric.cuda_repo_probe),
    M(gpucluster.fabric.fabric_link_info) - the others are the roles' rules, run on the controller
    (M(gpucluster.fabric.rdma_core)'s input rule with the arguments the role gives that module).
    A role whose argument spec refuses its values is not checked further.
  - No check stops another. The host fails once, with every problem, each naming the host, the variable and the fix.
  - Changes nothing on the host (cuda_repo's probe downloads into a directory of its own and removes it).
options:
  roles:
    description: The roles to check the host for; they are checked in site.yml's order.
    type: list
    elements: str
    required: true
    choices: [rdma_core, rdma_modules, hca_firmware, fabric_interfaces, roce_qos, cuda_repo, nccl, opensm, node_check,
      fabric_validate]
  unknown_vars:
    description:
      - The undeclared-variable check, C(error), C(warn) or C(ignore), as
        O(gpucluster.fabric.declared_vars#module:mode) of M(gpucluster.fabric.declared_vars); not run when unset.
    type: str
  argument_specs:
    description: Check the host's values against each role's argument spec.
    type: bool
    default: true
  intent:
    description:
      - When every check passed, return the host's intent as the fact C(gpucluster_fabric_intent) (C(schema), C(host),
        C(roles)), for each role what its applier is to make true, defaulted and templated, without OpenSM's keys;
        M(gpucluster.fabric.fabric_intent) writes it on the host.
    type: bool
    default: false
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.info_module
"""

EXAMPLES = r"""
- name: Check every host for the roles it gets, every problem at once
  gpucluster.fabric.preflight:
    roles: [rdma_core, rdma_modules, cuda_repo, nccl, fabric_interfaces, roce_qos, fabric_validate]
    unknown_vars: error
    intent: true
  register: __gpucluster_preflight
  any_errors_fatal: true
"""

RETURN = r"""
messages:
  description: Every problem found, each naming the host, the role or variable, and the fix.
  type: list
  elements: str
  returned: always
checked:
  description:
    - The roles whose checks passed (empty when any problem was found); the collection's playbooks read it to skip
      each role's input checks for that host later in the same run.
  type: list
  elements: str
  returned: always
checks_run:
  description: The roles whose own checks ran (not those whose argument spec refused their values).
  type: list
  elements: str
  returned: always
offered_nccl:
  description: The libnccl2/libnccl-dev builds the CUDA repository offers, when the cuda_repo check read its index.
  type: dict
  returned: when read
specs:
  description: One result per role in C(results), as a looped M(ansible.builtin.validate_argument_spec) returns them.
  type: dict
  returned: when O(argument_specs=true)
"""
