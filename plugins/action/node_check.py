# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

"""Action plugin gpucluster.fabric.node_check (documented in plugins/modules/node_check.py): with ``role_checks``,
role node_check's checks first (plugins/plugin_utils/role_checks.py), then the module."""

from ansible.plugins.action import ActionBase
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.role_checks import CheckedApplierAction


class ActionModule(CheckedApplierAction, ActionBase):
    ROLE = "node_check"
    MODULE = "gpucluster.fabric.node_check"
