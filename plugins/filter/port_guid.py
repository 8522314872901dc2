# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)


DOCUMENTATION = r"""
name: port_guid
short_description: Normalise InfiniBand port GUIDs to C(0x) + 16 lowercase hex digits
version_added: 0.1.0
description:
  - Accepts the forms people paste from C(ibstat -p), C(ibv_devinfo) or vendor tools
    (C(0x0002c903000a1b2c), C(0002c903000a1b2c), C(0002:c903:000a:1b2c)), in any case,
    and returns C(0x0002c903000a1b2c).
  - A list is normalised element by element.
  - Fails on anything that is not 16 hex digits, and on the zero GUID.
options:
  _input:
    description: A port GUID string, or a list of them.
    type: raw
    required: true
author:
  - gpucluster.fabric maintainers (@gpucluster)
"""

EXAMPLES = r"""
- name: Normalise the host's port GUIDs
  ansible.builtin.debug:
    msg: "{{ fabric_port_guids | gpucluster.fabric.port_guid }}"
  vars:
    fabric_port_guids: ["0002:C903:000A:1B2C", "0x0002c903000a1b2d"]
  # -> ["0x0002c903000a1b2c", "0x0002c903000a1b2d"]
"""

RETURN = r"""
_value:
  description: The normalised GUID (or list of GUIDs).
  type: raw
"""

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.lazy import function  # noqa: E402

normalize_port_guid = function("module_utils.opensm_partitions", "normalize_port_guid")


def port_guid(value):
    if isinstance(value, (list, tuple)):
        return [port_guid(item) for item in value]
    try:
        return normalize_port_guid(value)
    except ValueError as exc:
        raise AnsibleFilterError(
            f"port_guid: {value!r} is not a port GUID ({exc}); write 16 hex digits, e.g. 0x0002c903000a1b2c or "
            "0002:c903:000a:1b2c"
        ) from None


class FilterModule:
    def filters(self):
        return {"port_guid": port_guid}
