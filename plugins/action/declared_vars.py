# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

"""Action plugin gpucluster.fabric.declared_vars (documented in plugins/modules/declared_vars.py)."""

from ansible.plugins.action import ActionBase
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.inventory_checks import InventoryChecksMixin


class ActionModule(InventoryChecksMixin, ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset({"mode", "roles"})

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        host = task_vars.get("inventory_hostname", "?")
        if self._task.args.get("roles") is not None:
            result["specs"], result["spec_failed"] = self._check_specs(list(self._task.args["roles"]), task_vars)
        result.update(self._declared(task_vars, host, self._task.args.get("mode", "error")))
        return result
