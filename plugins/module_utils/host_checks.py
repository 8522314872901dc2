# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Several of the collection's modules in one remote call: the site preflight's host checks (module host_checks),
and the appliers of one play (module apply, through module node_apply: the steps concerns.appliers() lists).

Each step is one module's own code (its ``run`` function and argument spec in module_utils), given a stand-in for the
AnsibleModule whose ``params`` are the step's validated arguments and whose ``exit_json`` / ``fail_json`` end the step
instead of the process. host_checks accepts only modules that change nothing in the state asked for (``read_only``).
"""

import traceback

from . import cuda_repo_probe, fabric_link, hca_firmware, nccl, rdma_modules

# module name -> (argument spec, run(module), whether the arguments given leave the host unchanged); an entry may add
# a fourth item, the argument spec's other rules (ArgumentSpecValidator's keywords: required_if, ...).
STEPS = {
    "gpucluster.fabric.rdma_modules": (
        rdma_modules.ARGUMENT_SPEC,
        rdma_modules.run,
        lambda args: args.get("state") == "checked",
    ),
    "gpucluster.fabric.nccl": (nccl.ARGUMENT_SPEC, nccl.run, lambda args: args.get("state") == "checked"),
    "gpucluster.fabric.hca_firmware": (
        hca_firmware.ARGUMENT_SPEC,
        hca_firmware.run,
        lambda args: args.get("state") == "checked" or not args.get("apply"),
    ),
    "gpucluster.fabric.cuda_repo_probe": (
        cuda_repo_probe.ARGUMENT_SPEC,
        cuda_repo_probe.run,
        lambda args: not args.get("install"),
    ),
    "gpucluster.fabric.fabric_link_info": (fabric_link.INFO_ARGUMENT_SPEC, fabric_link.info, lambda args: True),
}


def steps_argument_spec(modules):
    """The argument spec of a module that runs ``modules`` as steps (host_checks, node_apply): option ``steps``."""
    return {
        "steps": {
            "type": "list",
            "elements": "dict",
            "required": True,
            "options": {
                "module": {"type": "str", "required": True, "choices": sorted(modules)},
                "args": {"type": "dict", "default": {}},
                "inputs": {"type": "dict", "default": {}},
            },
        },
    }


class StepDone(Exception):
    """A step called exit_json or fail_json: its result."""

    def __init__(self, result):
        super().__init__("step done")
        self.result = result


class StepModule:
    """The AnsibleModule as one step of the collection's code sees it, the one stand-in for it: the step's own params
    and warnings; exit_json and fail_json end the step only (StepDone). Within a module (host_checks, node_apply) the
    rest is that module's (``module``); without Ansible (the node check, node_check.NodeModule) a subclass has it."""

    def __init__(self, params, module=None):
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "warnings", [])

    def __getattr__(self, name):
        if self._module is None:
            raise AttributeError(f"{type(self).__name__} has no {name}")
        return getattr(self._module, name)

    def __setattr__(self, name, value):
        # e.g. run_command_environ_update, read by run_command: the module's own where there is one
        if self._module is None:
            object.__setattr__(self, name, value)
        else:
            setattr(self._module, name, value)

    def warn(self, warning):
        self.warnings.append(warning)

    def exit_json(self, **result):
        raise StepDone(self._finish(result))

    def fail_json(self, msg, **result):
        raise StepDone(self._finish(dict(result, failed=True, msg=msg)))

    def _finish(self, result):
        result.setdefault("changed", False)
        if self.warnings:
            result["warnings"] = list(self.warnings)
        return result


def _failure(msg):
    return {"failed": True, "changed": False, "msg": msg}


def run_step(module, validator_class, name, args, steps=None, runner="host_checks"):
    """The result of one step, as module ``name`` would return it; ``validator_class``: ArgumentSpecValidator;
    ``steps``: the modules the runner (module ``runner``) may run, STEPS by default."""
    steps = STEPS if steps is None else steps
    if name not in steps:
        return _failure(f"{runner}: {name} is not a module it runs; it runs {', '.join(sorted(steps))}")
    spec, run, read_only, *rules = steps[name]
    if not read_only(args):
        return _failure(f"{runner}: {name} would change the host with these arguments; it only checks")
    validation = validator_class(spec, **(rules[0] if rules else {})).validate(args)
    if validation.error_messages:
        return _failure(f"{name}: " + "; ".join(validation.error_messages))
    params = validation.validated_parameters
    module.no_log_values.update(
        str(params[key]) for key, option in spec.items() if option.get("no_log") and params.get(key)
    )
    try:
        run(StepModule(params, module))
    except StepDone as done:
        return done.result
    except Exception:  # noqa: BLE001 - one step's bug must not lose the other steps' results
        return _failure(f"{name} raised: {traceback.format_exc()}")
    return _failure(f"{name} returned without a result")


def run_steps(module, validator_class, steps, registry=None, runner="host_checks", stop_on_failure=False):
    """Every step's result, in order; ``inputs`` ({argument: [module, key]}) takes an argument from an earlier step's
    result when that result has the key (a failed step's too, as its module returned it). With ``stop_on_failure``,
    the steps after a failed one are not run: each says so, skipped."""
    results, by_module, failed = [], {}, None
    for step in steps:
        if failed:
            results.append({"changed": False, "skipped": True, "msg": f"not run: {failed} failed before it"})
            continue
        args = dict(step.get("args") or {})
        for argument, (source, key) in (step.get("inputs") or {}).items():
            if key in by_module.get(source, {}):
                args[argument] = by_module[source][key]
        result = run_step(module, validator_class, step["module"], args, registry, runner)
        results.append(result)
        by_module[step["module"]] = result
        if stop_on_failure and result.get("failed"):
            failed = step["module"]
    return results
