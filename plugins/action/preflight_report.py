# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

"""Action plugin gpucluster.fabric.preflight_report (documented in plugins/modules/preflight_report.py)."""

from ansible.plugins.action import ActionBase
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.preflight import failure_message, report


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset({"roles", "declared", "specs", "checks"})

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        host = task_vars.get("inventory_hostname", "?")
        args = self._task.args
        roles = list(args.get("roles") or [])
        messages = report(host, args.get("declared"), args.get("specs"), args.get("checks"))
        result.update(changed=False, messages=messages, checked=[] if messages else roles)
        if messages:
            result.update(failed=True, msg=failure_message(host, messages, roles))
        return result
