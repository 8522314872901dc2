# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

"""Action plugin gpucluster.fabric.fabric_validate_collect (documented in plugins/modules/fabric_validate_collect.py):
with ``role_checks``, role fabric_validate's input checks first (plugins/plugin_utils/role_checks.py), then the
module, which only reads; with ``record``, the host's record as the report judges it, built here on the controller
(module_utils/fabric_checks/health.py, collected_record) instead of by a task of its own."""

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_checks import collected_record, with_sm
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.preflight import failure_message
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.role_checks import RoleChecksMixin

ROLE = "fabric_validate"
# What the host's variables say, which the health tier judges with (fabric_checks.collected_record).
HEALTH_INPUTS = ("gpudirect", "allowed_debug", "require_pfc", "declared_roce", "gid_family")


class ActionModule(RoleChecksMixin, ActionBase):
    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = dict(task_vars or {})
        args = dict(self._task.args)
        record = args.pop("record", None)
        if boolean(args.pop("role_checks", False), strict=False):
            facts, failure = self._gather(task_vars)
            if failure:
                return failure
            host = task_vars.get("inventory_hostname", "localhost")
            messages = [
                m if m.startswith(f"{host}:") else f"{host}: gpucluster.fabric.{ROLE}: {m}"
                for m in self._checks(task_vars).run(ROLE)
            ]
            if messages:
                result.update(changed=False, failed=True, msg=failure_message(host, messages, [ROLE]))
                return result
            if facts:
                result["ansible_facts"] = facts
        # The health tier is judged on the node, by the node check's code, with what the play says of the host.
        if isinstance(args.get("health"), dict):
            inputs = {key: (record or {}).get(key) for key in HEALTH_INPUTS}
            args["health"] = dict(args["health"], host=task_vars.get("inventory_hostname"), inputs=inputs)
        result.update(
            self._execute_module(
                module_name="gpucluster.fabric.fabric_validate_collect", module_args=args, task_vars=task_vars
            )
        )
        if record is not None and not result.get("failed") and not result.get("unreachable"):
            inputs = dict(record)
            result["sm_query_host"] = inputs.pop("sm_query_host", None)
            result["record"] = collected_record(result, inputs)
            # The health tier as the node judged it (the report takes it as the fleet check's), or None: not asked.
            checks = result.get("checks")
            result["record"]["node_check"] = None if checks is None else {"report": {"checks": checks}, "error": None}
            if "sminfo" in result:  # asked in the module's own call (sm_query): the record is whole
                result["record"] = with_sm(result["record"], result["sminfo"], result["sm_query_host"])
        return result
