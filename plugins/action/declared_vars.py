# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
module: declared_vars
short_description: Refuse inventory variables with the collection's prefixes that no role declares
description:
  - Judges the variables the inventory (group_vars, host_vars, inventory files) and C(-e) extra vars give the host;
    every name starting with C(rdma_), C(cuda_repo_), C(nccl_), C(fabric_), C(opensm_) or C(gpucluster_) that no role
    of the collection declares is reported, with the closest declared name (C(nccl_versoin: did you mean
    nccl_version?)). All of the host's names are reported at once.
  - The declared names are read from the collection itself on every run (each role's argument specs and defaults,
    the facts the roles publish, the playbooks' C(gpucluster_*) switches), so they cannot drift from the roles.
  - Facts, registered results and C(set_fact) values of earlier plays of the run, play vars and role defaults are
    not judged.
  - Runs on the controller only; changes nothing.
options:
  mode:
    description:
      - C(error) fails the host, C(warn) prints the messages as warnings, C(ignore) skips the check (for sites that
        use these prefixes for their own variables).
    type: str
    choices: [error, warn, ignore]
    default: error
author:
  - gpucluster.fabric contributors
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
"""

from pathlib import Path  # noqa: E402

from ansible.plugins.action import ActionBase  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.declared_vars import (  # noqa: E402
    MODES,
    declared_names,
    failure_message,
    undeclared,
    undeclared_messages,
)

COLLECTION_ROOT = Path(__file__).resolve().parents[2]


def _cached(cache, host):
    """A host's entry in a fact cache: a cache plugin (ansible-core 2.19) or a mapping (earlier)."""
    if hasattr(cache, "contains"):
        return cache.get(host) if cache.contains(host) else {}
    return cache.get(host, {})


def _names(task, task_vars, host):
    """The host's variable names from the inventory and extra vars, without facts and results of this run."""
    manager = task.get_variable_manager()
    inventory_host = manager._inventory.get_host(host) if manager is not None else None
    if inventory_host is None:
        return set(task_vars["hostvars"][host])
    # Without a play or task: inventory, vars plugins, facts, results of earlier tasks, extra vars.
    names = set(manager.get_vars(host=inventory_host, include_hostvars=False))
    for cache in (manager._nonpersistent_fact_cache, manager._fact_cache):  # register and set_fact; facts
        names -= set(_cached(cache, host))
    return names | set(manager.extra_vars)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset({"mode"})

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        host = task_vars.get("inventory_hostname", "?")
        mode = self._task.args.get("mode", "error")
        result.update(changed=False, undeclared=[], messages=[])
        if mode not in MODES:
            choices = ", ".join(MODES)
            result.update(failed=True, msg=f"{host}: gpucluster_unknown_vars={mode!r}: choose one of {choices}")
            return result
        if mode == "ignore":
            result.update(skipped=True, skip_reason="gpucluster_unknown_vars=ignore")
            return result
        names = _names(self._task, task_vars, host)
        declared = declared_names(COLLECTION_ROOT)
        messages = undeclared_messages(host, names, declared)
        result.update(undeclared=undeclared(names, declared), messages=messages)
        if messages and mode == "error":
            result.update(failed=True, msg=failure_message(messages))
        elif messages:
            result["warnings"] = messages
        return result
