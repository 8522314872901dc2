# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The option of module fabric_validate_collect, whose action plugin runs role fabric_validate's input checks first
(plugins/action/fabric_validate_collect.py)."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  role_checks:
    description:
      - Run the input checks of role C(fabric_validate) first, with the host's role variables, on the controller with
        the site preflight's code, and fail with every problem before the module runs. The role passes V(true) unless
        the site preflight already checked the host.
    type: bool
    default: false
"""
