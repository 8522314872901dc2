# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

"""Action plugin gpucluster.fabric.apply (documented in plugins/modules/apply.py): the roles of one play in one call
on the host. Each role's arguments are those its own applier task gives its module (read from the role's task file
and templated with the role's view, plugins/plugin_utils/role_checks.py: the intent's code); where the site
preflight did not check the host for a role, that role's argument spec and input checks run first, every problem at
once, before any change."""

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase
from ansible_collections.gpucluster.fabric.plugins.action import roce_qos
from ansible_collections.gpucluster.fabric.plugins.action.declared_vars import ActionModule as DeclaredVarsAction
from ansible_collections.gpucluster.fabric.plugins.module_utils import concerns
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.preflight import failure_message
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.role_checks import (
    RoleChecksMixin,
    nothing_to_apply,
    read_keyring_deb,
    selected_by_tags,
)

ROLES = concerns.applied_together()  # the registry of concerns: the GPU nodes' appliers
# An argument taken from an earlier role's result in the same call: what cuda_repo read of the repository in check
# mode (before apt has lists of it) is what nccl checks its build against, as role nccl reads cuda_repo_applied.
INPUTS = {"nccl": {"offered_index": ["gpucluster.fabric.cuda_repo", "offered_nccl"]}}
# What a role's own action plugin adds to its module's result (none: the module's result as it is). A module with
# nothing to do is not run: role_checks.nothing_to_apply, the concern's own rule.
WITH_REQUEST = {"roce_qos": roce_qos.with_request}


class ActionModule(RoleChecksMixin, DeclaredVarsAction):
    TRANSFERS_FILES = False
    _requires_connection = True
    _VALID_ARGS = frozenset({"roles"})

    def run(self, tmp=None, task_vars=None):
        result = ActionBase.run(self, tmp, task_vars)
        task_vars = dict(task_vars or {})
        host = task_vars.get("inventory_hostname", "localhost")
        roles = list(self._task.args.get("roles") or [])
        unknown = sorted(set(roles) - set(ROLES))
        if unknown:
            raise AnsibleError(f"apply: unknown roles {', '.join(unknown)}; it applies {', '.join(ROLES)}")
        earlier = dict((task_vars.get("gpucluster_applied") or {}).get("results") or {})
        result.update(changed=False, results=earlier)
        if not roles:
            return result  # none of the play's roles applies to this host

        facts, failure = self._gather(task_vars)
        if failure:
            return failure
        if facts:
            result["ansible_facts"] = facts
        checks = self._checks(task_vars)
        checked = list(task_vars.get("__gpucluster_checked") or [])
        only, skip = task_vars.get("ansible_run_tags") or [], task_vars.get("ansible_skip_tags") or []
        selected, problems = [], []
        for role in roles:
            concern = concerns.get(role)
            if selected_by_tags(checks.role_vars(role).task(concern.task, concern.module).get("tags"), only, skip):
                selected.append(role)  # else the run's tags leave this role's applier out, as they would its task
        # Where the site preflight did not check the host for a role: its argument spec (as import_role's
        # rolespec_validate would check it), then its input checks (the preflight's code: one host call for those
        # that read the host), every problem of every role at once, before any change.
        unchecked = [role for role in selected if role not in checked]
        specs, spec_failed = self._check_specs(unchecked, task_vars) if unchecked else ({"results": []}, [])
        for entry in specs["results"]:
            problems += [f"{host}: gpucluster.fabric.{entry['item']}: {e}" for e in entry.get("argument_errors") or []]
        to_check = [role for role in unchecked if role not in spec_failed]
        for role, messages in (checks.run_all(to_check) if to_check else {}).items():
            problems += [m if m.startswith(f"{host}:") else f"{host}: gpucluster.fabric.{role}: {m}" for m in messages]
        steps, mine = [], {}
        for role in selected if not problems else []:
            module = concerns.get(role).module
            args = checks.role_vars(role).task_args(concerns.get(role).task, module)
            args.pop("role_checks", None)  # done above, for the roles that needed it
            if role == "cuda_repo":  # the controller's cuda-keyring .deb, as role cuda_repo's action plugin reads it
                missing = read_keyring_deb(args, self._role_file)
                problems += [f"{host}: gpucluster.fabric.cuda_repo: {error}" for error in missing]
            nothing = nothing_to_apply(role, args)
            if nothing is not None:
                mine[role] = WITH_REQUEST.get(role, lambda r, a: r)(nothing, args)
                continue
            steps.append((role, module, args))
        if problems:
            result.update(failed=True, msg=failure_message(host, problems, roles))
            return result

        if steps:
            called = self._execute_module(
                module_name="gpucluster.fabric.node_apply",
                module_args={
                    "steps": [
                        {"module": module, "args": args, "inputs": INPUTS.get(role, {})} for role, module, args in steps
                    ]
                },
                task_vars=task_vars,
            )
            outcomes = called.get("results") or []
            if len(outcomes) != len(steps):  # the call itself failed (unreachable, no Python): every role says so
                outcomes = [called] * len(steps)
            for (role, _module, args), outcome in zip(steps, outcomes):
                mine[role] = WITH_REQUEST.get(role, lambda r, a: r)(dict(outcome), args)
                # A fact a role's module sets (hca_firmware's reboot_required), as the role's own task would.
                if outcome.get("ansible_facts"):
                    result.setdefault("ansible_facts", {}).update(outcome["ansible_facts"])
            for key in ("failed", "msg", "diff", "unreachable"):
                if key in called:
                    result[key] = called[key]
            if called.get("unreachable"):
                return result
        result["results"] = {**earlier, **{role: mine[role] for role in roles if role in mine}}
        result["changed"] = any(outcome.get("changed") for outcome in mine.values())
        result["warnings"] = [f"{role}: {w}" for role in mine for w in mine[role].get("warnings") or []]
        if not result["warnings"]:
            del result["warnings"]
        if result.get("failed"):
            failed = [role for role in mine if mine[role].get("failed")]
            message = str(result.get("msg") or "failed")
            if not message.startswith(f"{host}:"):
                result["msg"] = f"{host}: gpucluster.fabric.{failed[0] if failed else 'apply'}: {message}"
        self._remove_tmp_path(self._connection._shell.tmpdir)
        return result

    def _role_file(self, source):
        return self._find(source, "cuda_repo")
