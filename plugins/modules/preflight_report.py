# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
# The documentation of action plugin preflight_report (plugins/action/preflight_report.py), which runs on the
# controller only; this file is where ansible-doc looks for it.

DOCUMENTATION = r"""
module: preflight_report
short_description: Report every problem the site preflight found on a host, in one message
description:
  - The last task of C(gpucluster.fabric.preflight). Gathers the results of the undeclared-variable check
    (M(gpucluster.fabric.declared_vars)), of each role's argument spec (M(ansible.builtin.validate_argument_spec))
    and the first failure of each role's own input checks, and fails the host with all of them in one message.
  - On success returns the roles checked, which the collection's playbooks read to skip each role's input checks
    for that host later in the same run.
  - Runs on the controller only; changes nothing.
options:
  roles:
    description: The roles checked for the host.
    type: list
    elements: str
    required: true
  declared:
    description: The registered result of M(gpucluster.fabric.declared_vars) (run with C(failed_when=false)).
    type: dict
  specs:
    description: The registered loop result of M(ansible.builtin.validate_argument_spec), one item per role.
    type: dict
  checks:
    description: The roles' check failures, each C({role, msg}).
    type: list
    elements: dict
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.info_module
  - gpucluster.fabric.attributes.controller
"""

EXAMPLES = r"""
- name: Report every problem of the host, or record the roles checked
  gpucluster.fabric.preflight_report:
    roles: [rdma_core, nccl]
    declared: "{{ __declared }}"
    specs: "{{ __specs }}"
    checks: "{{ __check_errors | default([]) }}"
  register: __preflight
"""

RETURN = r"""
messages:
  description: Every problem found, each naming the host, the role or variable, and the fix.
  type: list
  elements: str
  returned: always
checked:
  description: The roles whose checks passed (empty when any problem was found).
  type: list
  elements: str
  returned: always
"""
