# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The inventory's checks that action plugins declared_vars, preflight and apply share (``InventoryChecksMixin``):
each role's argument spec against the host's values, and the variables with the collection's prefixes that nothing
declares (plugin_utils/declared_vars.py)."""

from pathlib import Path

import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ..filter.preflight import argument_spec_without_defaults
from .declared_vars import MODES, YAML_LOADER, declared_names, failure_message, undeclared, undeclared_messages

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


def _spec(role):
    """A role's main argument spec, its defaults left out: the inventory's values are judged, not the role's."""
    path = COLLECTION_ROOT / "roles" / role / "meta" / "argument_specs.yml"
    # libyaml's safe loader where PyYAML has it (much faster than the pure-Python one): read for every host.
    return argument_spec_without_defaults(yaml.load(path.read_text(encoding="utf-8"), Loader=YAML_LOADER))  # noqa: S506


class InventoryChecksMixin:
    """For action plugins: ``_check_specs`` and ``_declared``, with this action's templar and task."""

    def _check_specs(self, roles, task_vars):
        """Each role's argument spec against the host's values, as ansible.builtin.validate_argument_spec checks it
        (the values templated, ``validate_role_argument_spec``), one result per role as a looped task has them."""
        results, failed = [], []
        for role in roles:
            entry = {"item": role, "changed": False, "failed": False}
            spec, values, errors = _spec(role), {}, []
            for name in spec:
                if name in task_vars:
                    try:
                        values[name] = self._templar.template(task_vars[name])
                    except Exception as exc:  # a value that cannot be templated fails its role's check only
                        errors.append(f"{name}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
            if not errors:
                errors = ArgumentSpecValidator(spec).validate(values, validate_role_argument_spec=True).error_messages
            if errors:
                entry.update(failed=True, argument_errors=errors)
                entry["msg"] = "Validation of arguments failed:\n" + "\n".join(errors)
            if entry["failed"]:
                failed.append(role)
            results.append(entry)
        return {"results": results}, failed

    def _declared(self, task_vars, host, mode):
        """The undeclared-variable check's result (without specs)."""
        result = {"changed": False, "undeclared": [], "messages": []}
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
