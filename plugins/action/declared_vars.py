# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

"""Action plugin gpucluster.fabric.declared_vars (documented in plugins/modules/declared_vars.py)."""

from pathlib import Path

from ansible.plugins.action import ActionBase
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.declared_vars import (
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
    try:
        # VariableManager's private parts (checked on ansible-core 2.19); without them, the host's hostvars.
        inventory_host = manager._inventory.get_host(host)
        caches = (manager._nonpersistent_fact_cache, manager._fact_cache)  # register and set_fact; facts
    except AttributeError:
        inventory_host = None
    if inventory_host is None:
        return set(task_vars["hostvars"][host])
    # Without a play or task: inventory, vars plugins, facts, results of earlier tasks, extra vars.
    names = set(manager.get_vars(host=inventory_host, include_hostvars=False))
    for cache in caches:
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
