# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

"""Action plugin gpucluster.fabric.preflight (documented in plugins/modules/preflight.py): every check of a host in
one task. The minimal facts (gathered when the host has none), the undeclared-variable check and the argument specs
(declared_vars' code), then each role's own checks (plugins/plugin_utils/role_checks.py), none stopping the others,
and one report of every problem (plugins/plugin_utils/preflight.py)."""

from ansible.errors import AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible_collections.gpucluster.fabric.plugins.module_utils import concerns
from ansible_collections.gpucluster.fabric.plugins.module_utils.intent import document
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.inventory_checks import InventoryChecksMixin
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.preflight import failure_message, report
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.role_checks import RoleChecksMixin


class ActionModule(RoleChecksMixin, InventoryChecksMixin, ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = True
    _VALID_ARGS = frozenset({"roles", "unknown_vars", "argument_specs", "intent"})

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = dict(task_vars or {})
        host = task_vars.get("inventory_hostname", "?")
        args = self._task.args
        roles = [role for role in concerns.roles() if role in list(args.get("roles") or [])]
        unknown = sorted(set(args.get("roles") or []) - set(concerns.roles()))
        if unknown:
            raise AnsibleError(
                f"preflight: unknown roles {', '.join(unknown)}; the roles are {', '.join(concerns.roles())}"
            )
        result["changed"] = False

        facts, failure = self._gather(task_vars)
        if failure:
            return failure
        if facts:
            result["ansible_facts"] = facts

        declared, specs, spec_failed = None, None, []
        mode = args.get("unknown_vars")
        if mode is not None:
            declared = self._declared(task_vars, host, mode)
        if boolean(args.get("argument_specs", True), strict=False):
            specs, spec_failed = self._check_specs(roles, task_vars)
            result["specs"] = specs

        checks = self._checks(task_vars)
        # A role whose values its spec refused is not checked: its checks would trip on them. What the host must tell
        # for the others is read in one call (module host_checks).
        result["checks_run"] = [role for role in roles if role not in spec_failed]
        problems = [
            {"role": role, "msg": message}
            for role, messages in checks.run_all(result["checks_run"]).items()
            for message in messages
        ]
        if checks.shared.get("offered_nccl") is not None:
            result["offered_nccl"] = checks.shared["offered_nccl"]
        if (declared or {}).get("warnings"):
            result["warnings"] = list(declared["warnings"])

        if boolean(args.get("intent", False), strict=False) and not problems and not spec_failed:
            roles_intent = {}
            for role in roles:
                try:
                    roles_intent[role] = checks.intent(role)
                except AnsibleError as exc:  # after the checks passed, a bug of ours: say which role
                    problems.append({"role": role, "msg": f"its intent cannot be computed: {str(exc).splitlines()[0]}"})
            if not problems:
                result.setdefault("ansible_facts", {})["gpucluster_fabric_intent"] = document(host, roles_intent)

        messages = report(host, declared, specs, problems)
        result.update(messages=messages, checked=[] if messages else roles)
        if messages:
            result.pop("ansible_facts", None)  # the run stops here: the report stays readable
            result.update(failed=True, msg=failure_message(host, messages, roles))
        self._remove_tmp_path(self._connection._shell.tmpdir)
        return result
