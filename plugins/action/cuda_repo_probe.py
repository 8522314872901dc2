# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

"""Action plugin gpucluster.fabric.cuda_repo_probe (documented in plugins/modules/cuda_repo_probe.py), and the base of
gpucluster.fabric.cuda_repo's.

Reads the controller's cuda-keyring .deb (``keyring_deb_src``) and hands its bytes to the module, which writes them
only into its own temporary directory and only when it has to verify or install them: no copy task, nothing left on
the host. A missing file is one more message in the module's ``errors``.
"""

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.role_checks import read_keyring_deb


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    MODULE = "gpucluster.fabric.cuda_repo_probe"
    ALWAYS_FAILS = False  # on a problem; the probe fails only with install or fail_on_errors

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        errors = read_keyring_deb(args, lambda source: self._find_needle("files", source))
        if errors and self.ALWAYS_FAILS:
            args["state"] = "checked"  # the applier only checks, for every other problem, and changes nothing
        result.update(self._execute_module(module_name=self.MODULE, module_args=args, task_vars=task_vars))
        if errors:
            result["errors"] = errors + list(result.get("errors") or [])
            if self.ALWAYS_FAILS or any(
                boolean(args.get(name, False), strict=False) for name in ("install", "fail_on_errors")
            ):
                result.update(failed=True, msg="; ".join(result["errors"]))
        if result.get("failed") and result.get("errors"):
            result["msg"] = f"{(task_vars or {}).get('inventory_hostname', 'localhost')}: {result['msg']}"
        return result
