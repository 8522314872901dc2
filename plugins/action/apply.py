# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

"""Action plugin gpucluster.fabric.apply (documented in plugins/modules/apply.py): one role's applier (``role``, its
role's own task) or the roles of one play in one call on the host (``roles``, site.yml's plays). Each role's arguments
are made from the host's variables as the registry of concerns says (plugins/module_utils/concerns.py, built by
plugins/plugin_utils/role_checks.py: the intent's code); where the site preflight did not check the host for a role,
that role's argument spec and input checks run first, every problem at once, before any change."""

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase
from ansible_collections.gpucluster.fabric.plugins.module_utils import concerns
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.inventory_checks import InventoryChecksMixin
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.preflight import failure_message
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.role_checks import (
    RoleChecksMixin,
    nothing_to_apply,
    read_keyring_deb,
)

# An argument taken from an earlier role's result in the same call: what cuda_repo read of the repository in check
# mode (before apt has lists of it) is what nccl checks its build against, as role nccl reads cuda_repo_applied.
INPUTS = {"nccl": {"offered_index": ["gpucluster.fabric.cuda_repo", "offered_nccl"]}}
# Tags that select one concern's steps (the registry's ``tags``): in a play of several roles, they select that role.
STEP_TAGS = frozenset(tag for concern in concerns.CONCERNS for tag in concern.tags)


class ActionModule(RoleChecksMixin, InventoryChecksMixin, ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = True
    _VALID_ARGS = frozenset({"roles", "role"})

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = dict(task_vars or {})
        host = task_vars.get("inventory_hostname", "localhost")
        one = self._task.args.get("role")
        roles = self._roles(one)
        earlier = dict((task_vars.get("gpucluster_applied") or {}).get("results") or {})
        result["changed"] = False
        if not one:
            result["results"] = earlier
        if not roles:
            return result  # none of the play's roles applies to this host

        facts, failure = self._gather(task_vars)
        if failure:
            return failure
        if facts:
            result["ansible_facts"] = facts
        checks = self._checks(task_vars)
        # The roles the site preflight checked for this host (playbooks/vars/steps.yml: a template, made here).
        checked = list(self._templar.template(task_vars.get("__gpucluster_checked")) or [])
        # A role's own task ran because Ansible selected it; in a play's call, each role is selected as Ansible
        # would select a task with that role's tags.
        selected = roles if one else [role for role in roles if self._selected(concerns.get(role), task_vars)]
        problems = []
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
        # The intent's part where the site preflight made it for a role it checked (made once per host and run),
        # else the role's arguments made from its variables here.
        intent = (task_vars.get("ansible_facts") or {}).get("gpucluster_fabric_intent") or {}
        steps, mine, made_from = [], {}, {}
        for role in selected if not problems else []:
            module = concerns.get(role).module
            args, made_from[role] = checks.applier_args(role, intent if role in checked else None)
            if "keyring_deb_src" in args:  # the controller's cuda-keyring .deb, which cuda_repo installs
                missing = read_keyring_deb(args, self._role_file)
                problems += [f"{host}: gpucluster.fabric.cuda_repo: {error}" for error in missing]
            nothing = nothing_to_apply(role, args)
            if nothing is not None:
                mine[role] = nothing
                continue
            steps.append((role, module, args))
        if problems:
            result.update(failed=True, msg=failure_message(host, problems, roles))
            return result

        if one:
            return self._one(result, one, steps, mine, task_vars)
        result["made_from"] = made_from
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
            for (role, _module, _args), outcome in zip(steps, outcomes):
                mine[role] = dict(outcome)
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

    def _roles(self, one):
        if one is not None:
            if "roles" in self._task.args or one not in concerns.applied():
                raise AnsibleError(f"apply: role={one!r}: name one of {', '.join(concerns.applied())}, without roles")
            return [one]
        roles = list(self._task.args.get("roles") or [])
        unknown = sorted(set(roles) - set(concerns.applied_together()))
        if unknown:
            raise AnsibleError(
                f"apply: unknown roles {', '.join(unknown)}; it applies {', '.join(concerns.applied_together())}"
            )
        return roles

    def _selected(self, concern, task_vars):
        """Whether the run's tags select ``concern`` in this task: Ansible's own rule (Task.evaluate_tags), for
        this task with its own tags less the other concerns' step tags (the tags of its play, block and import
        kept)."""
        task = self._task.copy()
        own = [tag for tag in self._task._tags or [] if tag not in STEP_TAGS or tag in concern.tags]
        task.tags = own + [tag for tag in concern.tags if tag not in own]
        return task.evaluate_tags(
            task_vars.get("ansible_run_tags") or [], task_vars.get("ansible_skip_tags") or [], task_vars
        )

    def _one(self, result, role, steps, mine, task_vars):
        """The task's result for one role: its module's own result (run here, with its own argument spec and its
        own no_log), as the role registers it."""
        if steps:
            ((_role, module, args),) = steps
            outcome = self._execute_module(module_name=module, module_args=args, task_vars=task_vars)
            mine[role] = dict(outcome)
        facts = result.pop("ansible_facts", None)
        result.update(mine[role])
        if facts:
            result["ansible_facts"] = {**facts, **(result.get("ansible_facts") or {})}
        host = task_vars.get("inventory_hostname", "localhost")
        if result.get("failed") and not str(result.get("msg") or "").startswith(f"{host}:"):
            result["msg"] = f"{host}: gpucluster.fabric.{role}: {result.get('msg') or 'failed'}"
        self._remove_tmp_path(self._connection._shell.tmpdir)
        return result

    def _role_file(self, source):
        return self._find(source, "cuda_repo")
