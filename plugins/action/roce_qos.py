# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

"""Action plugin gpucluster.fabric.roce_qos (documented in plugins/modules/roce_qos.py): with
``role_checks``, role roce_qos' checks first (plugins/plugin_utils/role_checks.py), then the module, unless the host
has no RoCE interface to apply settings to."""

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.role_checks import CheckedApplierAction


def with_request(result, args):
    """The module's result, with what was asked beside it (``settings``, ``require_pfc``): role roce_qos registers it
    as the fact gpucluster_roce_qos, which fabric_validate reads the live QoS back against."""
    if "interfaces" in args:
        result.setdefault("settings", args.get("interfaces") or {})
        result.setdefault("require_pfc", boolean(args.get("require_pfc", False), strict=False))
    return result


class ActionModule(CheckedApplierAction, ActionBase):
    ROLE = "roce_qos"
    MODULE = "gpucluster.fabric.roce_qos"

    def run(self, tmp=None, task_vars=None):
        return with_request(super().run(tmp, task_vars), self._task.args)
