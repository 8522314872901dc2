# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

"""Action plugin gpucluster.fabric.fabric_validate_collect (documented in plugins/modules/fabric_validate_collect.py):
with ``role_checks``, role fabric_validate's input checks first (plugins/plugin_utils/role_checks.py), then the
module, which only reads."""

from ansible.plugins.action import ActionBase
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.role_checks import CheckedApplierAction


class ActionModule(CheckedApplierAction, ActionBase):
    ROLE = "fabric_validate"
    MODULE = "gpucluster.fabric.fabric_validate_collect"
