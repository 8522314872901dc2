# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Each role's input checks, run on the controller in one task per host (action plugin gpucluster.fabric.preflight).

A role's checks see the host's variables as the role's own tasks would: the role's defaults under the host's
variables, the role's vars/main.yml over them (``RoleVars``). Checks that need the host call the role's own modules
with the arguments the registry of concerns makes from the view (plugins/module_utils/concerns.py, ``applier_args``,
the same arguments module apply gives them and the intent holds): rdma_modules and nccl with ``state: checked``,
cuda_repo's probe, fabric_interfaces' link probe. The other checks are the roles'
Python rules (``plugins/module_utils``), called directly (rdma_core's input rule, with its module's arguments) or
through the same filters their tasks used.

A check returns the problems it found, one message each; a role whose first step fails is not checked further (its
later steps would trip on what it could not read), as a role's own tasks would stop there.
"""

import base64
import importlib
from pathlib import Path

from ansible.errors import AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.template import trust_as_template
from ansible.vars.clean import namespace_facts

from ..module_utils import concerns, node_check_install, opensm_partitions
from ..module_utils import hca_firmware as hca_firmware_rules
from ..module_utils import rdma_core as rdma_core_rules
from .mlxconfig_params import CATALOGUE

COLLECTION_ROOT = Path(__file__).resolve().parents[2]


def role_dir(role):
    return COLLECTION_ROOT / "roles" / role


class RoleVars:
    """A host's variables as role ``role``'s tasks see them: its defaults, the host's variables, its vars."""

    parts_made = 0  # how many times, in this process, a concern's arguments were made whole (tests count them)

    def __init__(self, templar, loader, task_vars, role, extra=None):
        root = role_dir(role)
        variables = {}
        variables.update(_load(loader, root / "defaults" / "main.yml"))
        variables.update(task_vars)
        variables.update(_load(loader, root / "vars" / "main.yml"))
        variables.update(role_path=str(root), role_name=f"gpucluster.fabric.{role}")
        # A lookup in the role's tasks (roce_qos' boot script) finds the role's files first, as in the role.
        variables["ansible_search_path"] = [str(root), *list(task_vars.get("ansible_search_path") or [])]
        variables.update(extra or {})
        self.role = role
        self.memo = {}  # what derivations made once for this view (role opensm's partition model)
        self.loader = loader
        self._vars = variables
        self._args = None  # the applier's arguments, made once (applier_args)
        self.refused = []  # what the applier's argument spec refused of them
        self._templar = templar.copy_with_new_env(available_variables=variables)

    def get(self, name, default=None):
        """The templated value of a variable, or ``default`` when the host has none."""
        if name not in self._vars:
            return default
        return self._templar.template(self._vars[name])

    def raw(self, name, default=None):
        """A variable as it is, not templated (``hostvars``: the lazy mapping Ansible gives a filter)."""
        return self._vars.get(name, default)

    def set(self, name, value):
        self._vars[name] = value
        self._templar.available_variables = self._vars
        self._args, self.refused = None, []

    def template(self, value):
        return self._templar.template(value)

    def expression(self, text):
        """A Jinja expression of the collection's own (a constant of this file), evaluated with the role's view."""
        return self._templar.evaluate_expression(trust_as_template(text))

    def applier_args(self, intent=False):
        """The arguments of the role's applier module, made from this view as the registry of concerns says
        (concerns.CONCERNS ``args``) and typed by the module's own argument spec, as the module will type them; with
        ``intent``, only the concern's part of the intent (less ``leave_out``). A new dict each call; each value made
        once per view."""
        concern = concerns.get(self.role)
        if self._args is None:
            raw = {name: self.source(value) for name, value in concern.args.items()}
            self._args = _typed(concern, raw, self.refused)
            RoleVars.parts_made += 1
        if intent and self.refused:  # the intent is typed as the applier types it, or is not made
            raise AnsibleError(f"its applier refuses its arguments: {'; '.join(self.refused)}")
        leave_out = concern.leave_out if intent else ()
        return {name: value for name, value in self._args.items() if name not in leave_out}

    def steering_args(self):
        """The arguments the intent leaves out (the registry's ``leave_out``: the run's tags, the host's name, what
        steers one run), made alone: with the intent's part, they are the applier's arguments."""
        concern = concerns.get(self.role)
        return _typed(concern, {name: self.source(concern.args[name]) for name in concern.leave_out})

    def source(self, source):
        if isinstance(source, list):
            return [self.get(name) for name in source]
        if not isinstance(source, str):
            return source  # a constant
        if source.startswith("@template:"):
            name = source.split(":", 1)[1]
            name = self.get(name) if name.startswith("__") else name
            return self.expression(f"lookup('ansible.builtin.template', {name!r})")
        if source.startswith("@"):
            return DERIVED[source[1:]](self)
        return self.get(source)


def _opensm_model(rv):
    """The partitions' model of role opensm's view (opensm_partitions.resolve_partitions), made once per view: the
    partitions.conf text and the intent's partition list come from it."""
    if "opensm_model" not in rv.memo:
        model, errors = opensm_partitions.resolve_partitions(
            rv.get("opensm_partitions"),
            rv.raw("hostvars"),  # the lazy mapping, as a filter gets it: only what the rules read is templated
            rv.get("groups"),
            rv.get("opensm_default_partition"),
            rv.get("inventory_hostname", "localhost"),
        )
        if errors:  # the role's checks refuse these before any arguments are made
            raise AnsibleError("opensm_partitions: " + "; ".join(errors))
        rv.memo["opensm_model"] = model
    return rv.memo["opensm_model"]


def _partitions_conf(rv):
    """partitions.conf as role opensm writes it: the managed header, what made it, and the partitions."""
    head = [
        _header(rv),
        "# OpenSM partitions, rendered from opensm_partitions and the hosts' fabric_port_guids"
        " (gpucluster.fabric.opensm).",
        "# OpenSM re-reads this file on every heavy sweep; the role sends SIGHUP to start one.",
    ]
    return "\n".join(head) + "\n" + opensm_partitions.render_partitions_conf(_opensm_model(rv))


def _header(rv):
    return rv.expression("ansible_managed | default('Ansible managed') | comment")


def _first(*values):
    return next((value for value in values if value is not None), {})


# What the controller derives for an applier's argument (a registry source "@<what>") from a role's view.
DERIVED = {
    "host": lambda rv: rv.get("inventory_hostname", "localhost"),
    # Part of each file's content, which the node check compares.
    "header": _header,
    "os_family": lambda rv: (rv.get("ansible_facts") or {}).get("os_family"),
    "distribution": lambda rv: (rv.get("ansible_facts") or {}).get("distribution"),
    "run_tags": lambda rv: list(rv.get("ansible_run_tags") or []),
    "skip_tags": lambda rv: list(rv.get("ansible_skip_tags") or []),
    "roce_interfaces": lambda rv: [
        item.get("name")
        for item in rv.get("fabric_interfaces") or []
        if isinstance(item, dict) and item.get("kind") == "roce"
    ],
    # What the CUDA repository offers, read where apt cannot tell yet: by the site preflight's cuda_repo check, or by
    # role cuda_repo in check mode on a host whose apt has no lists of it.
    "offered_nccl": lambda rv: _first(
        rv.get("__gpucluster_offered_nccl"),
        (rv.get("cuda_repo_applied") or {}).get("offered_nccl"),
        (rv.get("__gpucluster_preflight") or {}).get("offered_nccl"),
    ),
    "site_preflight": lambda rv: boolean(rv.get("gpucluster_site_preflight", False), strict=False),
    "opensm_partitions_conf": _partitions_conf,
    "opensm_partition_list": lambda rv: opensm_partitions.partition_list(_opensm_model(rv)),
}


_MODULE_UTILS = f"{__package__.rsplit('.', 1)[0]}.module_utils"


def _rules(role, rules, *args, **kwargs):
    """The problems the role's input checks find (``rules``: "<module_utils module>.<function>", imported when a
    check runs: module apply on a host the site preflight checked runs none); a value of a type they cannot read
    is one problem of the role, not a crash of the preflight."""
    module, function = rules.rsplit(".", 1)
    try:
        return getattr(importlib.import_module(f"{_MODULE_UTILS}.{module}"), function)(*args, **kwargs)
    except (TypeError, ValueError, AttributeError) as exc:
        raise AnsibleError(f"{role}: the input checks cannot read a value ({exc}); check the role's variables") from exc


def concern_code(concern):
    """The module_utils module holding ``concern``'s applier code (the registry's ``code``)."""
    return importlib.import_module(f"{_MODULE_UTILS}.{concern.code}")


def _typed(concern, args, refused=None):
    """``args`` as the module's argument spec types them (ansible-core's own validator: "no" is False, 8 is "8" for a
    string); a value it refuses stays as it is, for the role's argument spec and checks to name, and the module to
    refuse. ``refused``: a list that gets the validator's messages."""
    spec = getattr(concern_code(concern), concern.spec)
    validation = ArgumentSpecValidator(spec).validate(args)
    if refused is not None:
        refused.extend(validation.error_messages)
    validated = validation.validated_parameters
    return {name: validated.get(name, value) for name, value in args.items()}


# The role files read in this process (a task's worker), parsed once: every view of every role reads the same
# defaults and vars files, and DataLoader's own cache hands out a deep copy on each read. Nothing changes them:
# a view copies their top level into its own variables, and templating makes new values.
_FILES = {}


def _load(loader, path):
    key = str(path)
    if key not in _FILES:
        found = path.is_file()
        _FILES[key] = loader.load_from_file(key, cache="none", unsafe=True, trusted_as_template=True) if found else {}
    return _FILES[key] or {}


def read_keyring_deb(args, find):
    """Put the controller's cuda-keyring .deb (``keyring_deb_src``, found with ``find``) into ``args`` as base64, for
    module cuda_repo_probe or cuda_repo, which write it only into their own temporary directory; the problem, if any."""
    source = args.get("keyring_deb_src") or ""
    if not source:
        return []
    try:
        with open(find(source), "rb") as handle:
            args["keyring_deb_content"] = base64.b64encode(handle.read()).decode("ascii")
    except (AnsibleError, OSError):
        version = args.get("keyring_version") or "1.1-1"
        return [
            f"cuda_repo_keyring_deb={source} is not a file on the controller; copy NVIDIA's "
            f"cuda-keyring_{version}_all.deb there or leave it empty to download it"
        ]
    return []


def result_messages(result):
    """The problems of a failed module result, one per line of its message."""
    text = str(result.get("msg") or "check failed")
    return [line.strip() for line in text.splitlines() if line.strip()]


def nothing_to_apply(role, args):
    """The result of ``role``'s module when ``args`` leave it nothing to do (the nothing_to_apply of its code, which
    the registry of concerns names), else None: module apply, the role's own action and the node check agree."""
    concern = concerns.get(role)
    if concern is None or not concern.code:
        return None
    hook = getattr(concern_code(concern), "nothing_to_apply", None)
    return hook(args) if hook else None


class Checks:
    """The checks of every role, for one host. ``run_module(name, args)`` runs a module on the host and returns its
    result; ``find_file(path, role)`` finds a controller file as the role's tasks would (their files/ directory)."""

    def __init__(self, templar, loader, task_vars, run_module, find_file):
        self.templar = templar
        self.loader = loader
        self.task_vars = task_vars
        self.run_module = run_module
        self.find_file = find_file
        self.host = task_vars.get("inventory_hostname", "localhost")
        self.shared = {}  # what one role's checks read for a later one (cuda_repo's offered NCCL builds for nccl)
        self._views = {}  # each role's view, made once: its checks, its applier's arguments and its intent read it
        self.views_made = 0

    def view(self, role):
        """Role ``role``'s view of this host's variables (RoleVars), made once per host and role."""
        if role not in self._views:
            self._views[role] = RoleVars(self.templar, self.loader, self.task_vars, role, self._extra(role))
            self.views_made += 1
        return self._views[role]

    def run(self, role):
        """The problems of one role on this host, each a message (prefixed with the host by the report)."""
        return self.run_all([role])[role]

    def run_all(self, roles):
        """{role: its problems} for ``roles``, in order; what the host must tell is read in one call: module
        host_checks runs each role's module (``_step_<role>``), and ``_judge_<role>`` reads its result."""
        views = {role: self.view(role) for role in roles}
        steps = {}
        for role in roles:
            prepare = getattr(self, f"_step_{role}", None)
            step = prepare(views[role]) if prepare else None
            if step is not None:
                steps[role] = step
        results = self._call(steps)
        problems = {}
        for role in roles:
            judge = getattr(self, f"_judge_{role}", None)
            if judge is not None:
                problems[role] = judge(views[role], steps.get(role), results.get(role))
            else:
                problems[role] = getattr(self, f"_check_{role}")(views[role])
        return problems

    def _call(self, steps):
        """{role: its module's result}: one module run on the host for one step, module host_checks for several."""
        if not steps:
            return {}
        if len(steps) == 1:
            ((role, step),) = steps.items()
            return {role: self.run_module(step["module"], step["args"])}
        result = self.run_module(
            "gpucluster.fabric.host_checks",
            {"steps": [{key: step[key] for key in ("module", "args", "inputs")} for step in steps.values()]},
        )
        if result.get("failed") or result.get("unreachable") or len(result.get("results") or []) != len(steps):
            return dict.fromkeys(steps, result)  # the call itself failed: every role says so
        return dict(zip(steps, result["results"]))

    def applier_args(self, role, intent=None):
        """(``role``'s applier arguments, what they were made from: "intent" or "variables"): the intent's part
        (``intent``: the host's intent document, which the site preflight made) with the arguments it leaves out,
        or, where it has no part for the role or masked it, made from the role's variables."""
        part = ((intent or {}).get("roles") or {}).get(role)
        if part is None or role in (intent.get("masked") or []):  # a masked URL is no argument
            return self.view(role).applier_args(), "variables"
        if concerns.get(role).part:
            part = part["applier"]
        return {**part, **self.view(role).steering_args()}, "intent"

    def intent(self, role):
        """The host's part of the intent for ``role``: what its applier is to make true, defaulted and templated, and
        what the node check reads beside (the registry's ``part``, typed by its options). After the role's checks it
        reads their view, whose arguments are made already."""
        rv = self.view(role)
        concern = concerns.get(role)
        if not concern.part:
            return rv.applier_args(intent=True)
        raw = {key: rv.source(source) for key, (source, _option) in concern.part.items()}
        validation = ArgumentSpecValidator(concerns.part_spec(role)).validate(raw)
        if validation.error_messages:
            raise AnsibleError(f"its part of the intent cannot be typed: {'; '.join(validation.error_messages)}")
        part = dict(validation.validated_parameters)
        if concern.module:  # the files the role's module writes
            part["applier"] = rv.applier_args(intent=True)
        return part

    def _extra(self, role):
        if role == "nccl" and "offered_nccl" in self.shared:  # read by cuda_repo's check before this view
            return {"__gpucluster_offered_nccl": self.shared["offered_nccl"]}
        return None

    @staticmethod
    def _step(module, args, inputs=None, errors=()):
        return {"module": module, "args": args, "inputs": inputs or {}, "errors": list(errors)}

    @staticmethod
    def _failed(result):
        return result_messages(result) if result.get("failed") else []

    def _applier_step(self, rv):
        # The applier itself, in its state checked: it checks and changes nothing.
        return self._step(concerns.get(rv.role).module, dict(rv.applier_args(), state="checked"))

    def _check_rdma_core(self, rv):
        # Input only (OS family, memlock, package and unit names): the module's own rule, run here on the controller
        # with the arguments the role gives the module, so the host is not called for it.
        args = rv.applier_args()
        return [f"{self.host}: {error}" for error in rdma_core_rules.input_errors(args)]

    def _step_rdma_modules(self, rv):
        return self._applier_step(rv)

    def _judge_rdma_modules(self, rv, step, result):
        return self._failed(result)

    def _hca_firmware_errors(self, rv):
        # Names and values against mstflint's parameter database, here on the controller (no mstflint needed).
        errors = hca_firmware_rules.setting_errors(rv.get("hca_firmware_settings"), CATALOGUE)
        return [f"{self.host}: {e}" for e in errors + hca_firmware_rules.device_errors(rv.get("hca_firmware_devices"))]

    def _step_hca_firmware(self, rv):
        # The host is read only where the site names settings, and names them well: its adapters, their firmware.
        if self._hca_firmware_errors(rv) or not rv.get("hca_firmware_settings"):
            return None
        return self._applier_step(rv)

    def _judge_hca_firmware(self, rv, step, result):
        return self._hca_firmware_errors(rv) + self._failed(result or {})

    def _step_cuda_repo(self, rv):
        # The applier's own arguments, checked by the probe: nothing is installed or written.
        args = {k: v for k, v in rv.applier_args().items() if k not in ("run_tags", "skip_tags", "host", "header")}
        args["fail_on_errors"] = True
        errors = read_keyring_deb(args, lambda source: self.find_file(source, "cuda_repo"))
        return self._step("gpucluster.fabric.cuda_repo_probe", args, errors=errors)

    def _judge_cuda_repo(self, rv, step, result):
        if "offered_nccl" in result:
            self.shared["offered_nccl"] = result["offered_nccl"]
        if step["errors"]:
            return step["errors"] + [str(e) for e in result.get("errors") or []]
        return self._failed(result)

    def _step_nccl(self, rv):
        step = self._applier_step(rv)
        # What cuda_repo's probe read from the repository's signed index, when it runs in the same call.
        step["inputs"] = {"offered_index": ["gpucluster.fabric.cuda_repo_probe", "offered_nccl"]}
        return step

    def _judge_nccl(self, rv, step, result):
        return self._failed(result)

    def _step_fabric_interfaces(self, rv):
        interfaces = rv.get("fabric_interfaces")
        if not isinstance(interfaces, (list, tuple)):
            return None  # the rule below says what is wrong with it
        names = [i["name"] for i in interfaces if isinstance(i, dict) and isinstance(i.get("name"), str)]
        args = {"names": names, "detect_backend": rv.get("fabric_interfaces_backend") == "auto"}
        return self._step("gpucluster.fabric.fabric_link_info", args)

    def _judge_fabric_interfaces(self, rv, step, result):
        if result is not None:
            if result.get("failed"):
                return result_messages(result)
            rv.set("__fabric_interfaces_host", result)
        return _rules(
            "fabric_interfaces",
            "fabric_mtu.preflight_errors",
            rv.get("fabric_interfaces"),
            rv.get("__fabric_interfaces_checks"),
        )

    def _check_roce_qos(self, rv):
        return _rules("roce_qos", "roce_qos.input_errors", rv.get("__roce_qos_input"))

    def _check_opensm(self, rv):
        inputs, hostvars, groups = rv.get("__opensm_inputs"), rv.raw("hostvars"), rv.get("groups")
        facts = rv.get("ansible_facts")
        return _rules("opensm", "opensm_input.input_errors", inputs, hostvars, groups, self.host, facts)

    def _check_node_check(self, rv):
        args = rv.applier_args()
        _settings, errors = node_check_install.checked_settings(args)
        return [f"{self.host}: {error}" for error in errors]

    def _check_fabric_validate(self, rv):
        errors = _rules("fabric_validate", "fabric_checks.preflight_errors", **rv.get("__fabric_validate_inputs"))
        return [f"{self.host}: {'; '.join(errors)}"] if errors else []


class RoleChecksMixin:
    """For action plugins: the minimal facts and the roles' checks, with this action's connection."""

    def _module(self, name, args, task_vars):
        return self._execute_module(module_name=name, module_args=dict(args), task_vars=task_vars)

    def _find(self, source, role):
        """A controller file as the role's tasks find it: the play's search path, then the role's files/."""
        try:
            return self._find_needle("files", source)
        except AnsibleError:
            candidate = role_dir(role) / "files" / source
            if candidate.is_file():
                return str(candidate)
            raise

    def _gather(self, task_vars):
        """The facts the roles read (os_family, distribution) when the host has none yet (a play without
        gather_facts): (facts or None, failure). Only the distribution's: the "min" subset would add the login's
        environment, which a failed task's result prints whole."""
        if "os_family" in (task_vars.get("ansible_facts") or {}):
            return None, None
        subset = ["!all", "!min", "distribution"]
        gathered = self._module("ansible.builtin.setup", {"gather_subset": subset}, task_vars)
        if gathered.get("failed") or gathered.get("unreachable"):
            return None, gathered
        facts = namespace_facts(gathered.get("ansible_facts") or {})["ansible_facts"]
        task_vars["ansible_facts"] = {**(task_vars.get("ansible_facts") or {}), **facts}
        return facts, None

    def _checks(self, task_vars):
        return Checks(self._templar, self._loader, task_vars, lambda n, a: self._module(n, a, task_vars), self._find)
