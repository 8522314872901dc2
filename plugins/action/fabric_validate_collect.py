# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

"""Action plugin gpucluster.fabric.fabric_validate_collect (documented in plugins/modules/fabric_validate_collect.py):
with ``role_checks``, role fabric_validate's input checks first (plugins/plugin_utils/role_checks.py), then the
module, which only reads; with ``record``, the host's record as the report judges it, built here on the controller
(module_utils/fabric_checks/health.py, collected_record) instead of by a task of its own."""

from ansible.plugins.action import ActionBase
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_checks import collected_record, with_sm
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.role_checks import CheckedApplierAction

# What the host's variables say, which the health tier judges with (fabric_checks.collected_record).
HEALTH_INPUTS = ("gpudirect", "allowed_debug", "require_pfc", "declared_roce", "gid_family")


class ActionModule(CheckedApplierAction, ActionBase):
    ROLE = "fabric_validate"
    MODULE = "gpucluster.fabric.fabric_validate_collect"
    ACTION_ARGS = ("record",)

    def _module_args(self, args, own, task_vars):
        # The health tier is judged on the node, by the node check's code, with what the play says of the host.
        if isinstance(args.get("health"), dict):
            inputs = {key: (own.get("record") or {}).get(key) for key in HEALTH_INPUTS}
            args = dict(args, health=dict(args["health"], host=task_vars.get("inventory_hostname"), inputs=inputs))
        return args

    def _finish(self, result, own):
        inputs = own.get("record")
        if inputs is not None and not result.get("failed") and not result.get("unreachable"):
            inputs = dict(inputs)
            result["sm_query_host"] = inputs.pop("sm_query_host", None)
            result["record"] = collected_record(result, inputs)
            # The health tier as the node judged it (the report takes it as the fleet check's), or None: not asked.
            checks = result.get("checks")
            result["record"]["node_check"] = None if checks is None else {"report": {"checks": checks}, "error": None}
            if "sminfo" in result:  # asked in the module's own call (sm_query): the record is whole
                result["record"] = with_sm(result["record"], result["sminfo"], result["sm_query_host"])
        return result
