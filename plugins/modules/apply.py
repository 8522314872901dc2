#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: apply
short_description: Apply one role's concern, or the roles of one play in one call on the host
description:
  - Each role's applier task is this action with its role alone (O(role)); the collection's playbooks apply the roles
    of one play in one call on the host instead of one per role (O(roles)) - C(gpucluster.fabric.rdma) the roles
    C(rdma_core) and C(rdma_modules), C(gpucluster.fabric.nccl) the roles C(cuda_repo) and C(nccl) (cuda_repo's
    applier refreshes apt's index before nccl's runs), C(gpucluster.fabric.interfaces) the roles C(fabric_interfaces)
    and C(roce_qos).
  - The action plugin makes each role's arguments from the role's defaults and vars under the host's variables, as
    the registry of concerns (C(plugins/module_utils/concerns.py)) says, typed by the module's own argument spec - the
    same computation as the host's intent (M(gpucluster.fabric.preflight)) - and runs the role's argument spec and
    input checks first where that preflight did not pass them for the host, every problem at once, before any
    change.
  - With O(role), the role's applier module runs on the host as itself, and the task's result is the module's.
    With O(roles), module M(gpucluster.fabric.node_apply) runs each role's step with its applier module's own code
    and argument spec, in the order given; a step that fails stops those after it. Each changes only what differs
    from the live state and says what and why.
  - In a call of several roles, a role runs when the run's tags select it as Ansible selects a task
    (C(Task.evaluate_tags)) carrying the role's own step tags (the registry's) and the tags the task inherits; the
    task carries every step tag of its roles.
version_added: 0.2.0
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.posix
options:
  role:
    description:
      - One role to apply; the task's result is its module's. Mutually exclusive with O(roles).
    type: str
    choices: [rdma_core, rdma_modules, hca_firmware, fabric_interfaces, roce_qos, cuda_repo, nccl, opensm, node_check]
  roles:
    description: The roles to apply, in order, in one call on the host. Mutually exclusive with O(role).
    type: list
    elements: str
    choices: [rdma_core, rdma_modules, hca_firmware, fabric_interfaces, roce_qos, cuda_repo, nccl]
attributes:
  action:
    description:
      - Indicates this has a corresponding action plugin so some parts of the options can be executed on the
        controller.
    support: full
    details: The module that runs on the host is M(gpucluster.fabric.node_apply).
  check_mode:
    support: full
    details: Each role's applier reports the changes a run would make, each with its reason, and changes nothing.
  diff_mode:
    support: full
    details: The diffs of every role's files, in order.
notes:
  - Registered as C(gpucluster_applied) by the collection's playbooks, whose RV(results) then hold every role applied
    in the run so far (each call adds its roles to those of the calls before).
"""

EXAMPLES = r"""
- name: Apply role nccl's concern (its arguments made from the role's variables)
  gpucluster.fabric.apply:
    role: nccl
  register: nccl_installed

- name: Apply rdma_core and rdma_modules in one call
  gpucluster.fabric.apply:
    roles: [rdma_core, rdma_modules]
  register: gpucluster_applied
"""

RETURN = r"""
results:
  description:
    - Each role's result, as its applier module returns it (C(gpucluster_applied.results.rdma_modules) is what role
      C(rdma_modules) registers as C(gpucluster_gpudirect) when it runs alone), with the roles of the earlier calls
      registered under the same name in the run.
    - A role that did not run this time (its tags not selected, or a step before it failed) is absent or says why.
  returned: with O(roles)
  type: dict
made_from:
  description:
    - Where each role's arguments came from in this call - C(intent), the part of the host's intent that the site
      preflight made (M(gpucluster.fabric.preflight)), with the arguments it leaves out; C(variables), made here from
      the role's variables (a host the site preflight did not check for the role).
  returned: with O(roles)
  type: dict
  sample: {"rdma_core": "intent", "rdma_modules": "intent"}
"""
