# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
# The documentation of action plugin declared_vars (plugins/action/declared_vars.py), which runs on the controller
# only; this file is where ansible-doc looks for it.

DOCUMENTATION = r"""
module: declared_vars
version_added: 0.2.0
short_description: Refuse inventory variables with the collection's prefixes that no role declares
description:
  - Judges the variables the inventory (group_vars, host_vars, inventory files) and C(-e) extra vars give the host;
    every name starting with C(rdma_), C(cuda_repo_), C(nccl_), C(fabric_), C(opensm_) or C(gpucluster_) that no role
    of the collection declares is reported, with the closest declared name (C(nccl_versoin) gets C(did you
    mean nccl_version?)). All of the host's names are reported at once.
  - The declared names are read from the collection itself on every run (each role's argument specs and defaults,
    the facts the roles publish, the playbooks' C(gpucluster_*) switches), so they cannot drift from the roles.
  - Facts, registered results and C(set_fact) values of earlier plays of the run, play vars and role defaults are
    not judged.
  - With O(roles), it also checks the host's values against each of those roles' argument specs (their defaults
    left out, so that the inventory's values are judged), as M(ansible.builtin.validate_argument_spec) would, and
    returns the results in RV(specs); the site preflight does both in this one task.
  - Runs on the controller only; changes nothing.
options:
  mode:
    description:
      - C(error) fails the host, C(warn) prints the messages as warnings, C(ignore) skips the check (for sites that
        use these prefixes for their own variables).
    type: str
    choices: [error, warn, ignore]
    default: error
  roles:
    description: Roles of the collection whose argument specs to check the host's values against (none when unset).
    type: list
    elements: str
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.info_module
  - gpucluster.fabric.attributes.controller
"""

EXAMPLES = r"""
- name: Refuse misspelled variables
  gpucluster.fabric.declared_vars:
    mode: "{{ gpucluster_unknown_vars | default('error') }}"
"""

RETURN = r"""
undeclared:
  description: The host's undeclared names with one of the collection's prefixes.
  type: list
  elements: str
  returned: always
messages:
  description: One message per undeclared name, naming the host, the variable and the closest declared name.
  type: list
  elements: str
  returned: always
specs:
  description:
    - One result per role of O(roles) in C(results), as a looped M(ansible.builtin.validate_argument_spec) returns
      them (C(item), C(failed), and C(argument_errors) and C(msg) when the values were refused).
  type: dict
  returned: when O(roles) is set
spec_failed:
  description: The roles whose argument spec refused the host's values.
  type: list
  elements: str
  returned: when O(roles) is set
"""
