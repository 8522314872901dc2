# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

"""Action plugin gpucluster.fabric.fabric_interfaces (documented in plugins/modules/fabric_interfaces.py): with
``role_checks``, role fabric_interfaces' checks first (plugins/plugin_utils/role_checks.py), then the module."""

from ansible.plugins.action import ActionBase
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.role_checks import CheckedApplierAction


class ActionModule(CheckedApplierAction, ActionBase):
    ROLE = "fabric_interfaces"
    MODULE = "gpucluster.fabric.fabric_interfaces"
