# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Filters of role roce_qos: its input checks and the settings per RoCE interface (each documented in <name>.yml)."""

from ansible_collections.gpucluster.fabric.plugins.plugin_utils.lazy import function

# Every problem of one host's QoS input, each naming the host, the variable and the fix.
roce_qos_errors = function("module_utils.roce_qos", "input_errors")
# {interface: settings} for every RoCE interface, as module roce_qos and the boot-time unit take them.
roce_qos_settings = function("module_utils.roce_qos", "input_settings")


class FilterModule:
    def filters(self):
        return {"roce_qos_errors": roce_qos_errors, "roce_qos_settings": roce_qos_settings}
