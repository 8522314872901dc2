# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The option of the modules whose action plugin runs their role's input checks first (CheckedApplierAction)."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  role_checks:
    description:
      - Run the input checks of the role this module serves first (the role of the same name; C(fabric_validate)
        for M(gpucluster.fabric.fabric_validate_collect)), with the host's role variables, on the controller with
        the site preflight's code, and fail with every problem before the module runs. The role passes V(true)
        unless the site preflight already checked the host.
    type: bool
    default: false
"""
