# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Role rdma_modules' rules: its input, the files it writes, and GPUDirect RDMA after nvidia_peermem was tried.

Pure functions, no Ansible imports, importable on Python 3.8 targets: the module ``rdma_modules`` applies them on the
node. The GPUDirect decision itself (DMA-BUF, nvidia-peermem or none) is ``gpudirect.decide``.
"""

import json

from . import gpudirect_acs
from .applier import ARGUMENT_SPEC as APPLIER_ARGUMENTS
from .applier import Applier
from .fabric_model import interface_modules
from .gpudirect import MODES, assess, valid_module_name

LOAD_CONF = "/etc/modules-load.d/gpucluster-rdma.conf"
PEERMEM_CONF = "/etc/modules-load.d/gpucluster-nvidia-peermem.conf"
SOFTDEP_CONF = "/etc/modprobe.d/gpucluster-rdma.conf"


def _names(value):
    return value if isinstance(value, (list, tuple)) else [value]


def _softdep_problem(entry):
    if not isinstance(entry, dict) or "module" not in entry:
        return True
    return any(not isinstance(entry.get(key, []), (list, tuple)) for key in ("pre", "post"))


def input_errors(data):
    """Softdep entries need a module and lists pre/post; every module name is a kernel module name.

    ``data``: the options of module rdma_modules (softdeps, core_modules, extra_modules, hca_unbound_modules,
    hca_driver_map)."""
    errors = []
    softdeps = data.get("softdeps") or []
    for index, entry in enumerate(softdeps):
        if _softdep_problem(entry):
            errors.append(
                f"rdma_modules_softdeps[{index}]={json.dumps(entry, default=str)} needs a module name and lists for"
                " pre/post, e.g. {module: mlx5_ib, pre: [mlx5_core]}."
            )
    driver_map = data.get("hca_driver_map") or {}
    sources = [
        ("rdma_modules_core", data.get("core_modules") or []),
        ("rdma_modules_extra", data.get("extra_modules") or []),
        ("rdma_modules_hca_unbound_modules", data.get("hca_unbound_modules") or []),
        ("rdma_modules_hca_driver_map", list(driver_map) + [m for v in driver_map.values() for m in _names(v)]),
    ]
    softdep_names = []
    for entry in softdeps:
        if isinstance(entry, dict) and not _softdep_problem(entry):
            softdep_names += [entry["module"], *entry.get("pre", []), *entry.get("post", [])]
    sources.append(("rdma_modules_softdeps", softdep_names))
    for variable, names in sources:
        for name in _names(names):
            if not valid_module_name(str(name)):
                errors.append(
                    f"{json.dumps(str(name))} in {variable} is not a kernel module name (letters, digits, '_' and"
                    " '-' only); remove it or fix its spelling."
                )
    return errors


def _peermem_advice(probe):
    facts = probe.get("facts") or {}
    evidence = (facts.get("ib_core") or {}).get("evidence", "unknown")
    release = (facts.get("kernel") or {}).get("release", "unknown")
    return (
        f"nvidia-peermem needs the PeerDirect API of MLNX_OFED/DOCA's ib_core (here: {evidence}); on the inbox"
        ' ib_core it fails with "Invalid argument" (dmesg has the kernel\'s side). Install MLNX_OFED/DOCA-OFED for'
        f" kernel {release} and reinstall the NVIDIA driver after it (nvidia-peermem is built against the ib_core"
        " present then), or use DMA-BUF (rdma_modules_gpudirect_mode=auto or dmabuf; it needs kernel >= 5.12,"
        " rdma-core >= 34, NCCL >= 2.13 and the open GPU kernel modules)."
    )


def _load_state(load):
    """not-tried, loaded or failed (with the error) from what loading nvidia_peermem gave: None (not tried) or
    {rc, msg|stderr}."""
    if not isinstance(load, dict) or load.get("skipped") or not load:
        return "not-tried", ""
    if load.get("rc") or "exception" in load:
        return "failed", str(load.get("msg") or load.get("stderr") or "modprobe failed").strip()
    return "loaded", ""


def gpudirect_outcome(probe, load, settings):
    """GPUDirect RDMA after trying nvidia_peermem: what to record, persist, fail on and warn about.

    ``probe`` is what ``gpudirect`` gathered and decided, ``load`` the modprobe of nvidia_peermem (None when not
    tried), ``settings`` {host, mode (the requested one), force, peermem_conf}. Returns {state, error, persist,
    record: {mode, reason}, fatal (a message, or empty), warnings}.
    """
    host = settings.get("host", "?")
    requested = settings.get("mode", "auto")
    force = bool(settings.get("force"))
    decision = probe.get("gpudirect") or {"mode": "none", "reason": ""}
    wanted = decision.get("mode") == "peermem"
    state, error = _load_state(load) if wanted else ("not-tried", "")
    failed_unforced = wanted and state == "failed" and not force
    persist = wanted and (state == "loaded" or force)
    note = ""
    if wanted and state == "failed":
        how = (
            ", persisted anyway (rdma_modules_peermem_force)"
            if force
            else ", so it is not persisted and GPUDirect RDMA is off"
        )
        note = f"; nvidia_peermem did not load here ({error}){how}"
    elif wanted and state == "not-tried":
        why = (probe.get("runtime_load") or {}).get("why", "")
        how = (
            ", persisted (rdma_modules_peermem_force)"
            if force
            else ", so not persisted: set rdma_modules_peermem_force=true to persist it unproven"
        )
        note = f"; nvidia_peermem not loaded now ({why}){how}"
    record = {"mode": "none" if failed_unforced else decision.get("mode"), "reason": decision.get("reason", "") + note}
    fatal = ""
    warnings = []
    if failed_unforced and requested == "peermem":
        fatal = (
            f"{host}: rdma_modules_gpudirect_mode=peermem, but nvidia_peermem did not load: {error}."
            f" {_peermem_advice(probe)} To persist it anyway, set rdma_modules_peermem_force=true."
        )
    elif state == "failed":
        what = (
            "persisted anyway (rdma_modules_peermem_force), but GPUDirect RDMA works only once it loads"
            if force
            else "so it is not persisted and GPUDirect RDMA is off"
        )
        warnings.append(f"WARNING {host}: nvidia_peermem did not load ({error}), {what}. {_peermem_advice(probe)}")
    persisted_in = ((probe.get("facts") or {}).get("peermem") or {}).get("persisted_in") or []
    foreign = [path for path in persisted_in if path != settings.get("peermem_conf")]
    if foreign and (not persist or state == "failed"):
        warnings.append(
            f"WARNING {host}: {', '.join(foreign)} load nvidia_peermem at boot, but GPUDirect RDMA here is"
            f" {record['mode']}: where nvidia_peermem cannot load, systemd-modules-load fails on every boot. Remove"
            " that entry."
        )
    return {
        "state": state,
        "error": error,
        "persist": persist,
        "record": record,
        "fatal": fatal,
        "warnings": warnings,
    }


def softdep_lines(softdeps):
    """modprobe.d ``softdep`` lines (modprobe.d(5)) of checked ``rdma_modules_softdeps`` entries."""
    lines = []
    for entry in softdeps or []:
        line = "softdep " + entry["module"]
        if entry.get("pre"):
            line += " pre: " + " ".join(entry["pre"])
        if entry.get("post"):
            line += " post: " + " ".join(entry["post"])
        lines.append(line)
    return lines


def _with_header(header, lines):
    text = header.rstrip("\n") + "\n" if header else ""
    return text + "".join(line + "\n" for line in lines)


def load_conf(header, wanted):
    """modules-load.d(5) file: every module the host loads at boot, in load order."""
    comment = "# RDMA kernel modules, loaded at boot by systemd-modules-load (role gpucluster.fabric.rdma_modules)."
    return _with_header(header, [comment, *wanted])


def softdep_conf(header, softdeps):
    """modprobe.d(5) file of the softdep ordering, or None when none is asked for (the file is then removed)."""
    if not softdeps:
        return None
    comment = "# Load order for RDMA modules beyond their symbol dependencies (role gpucluster.fabric.rdma_modules)."
    return _with_header(header, [comment, *softdep_lines(softdeps)])


def peermem_conf(header, force):
    """modules-load.d(5) file that loads nvidia_peermem at boot."""
    forced = " (or because rdma_modules_peermem_force is set)" if force else ""
    return _with_header(
        header,
        [
            "# GPUDirect RDMA through nvidia-peermem (role gpucluster.fabric.rdma_modules), written only after it",
            f"# loaded on this kernel{forced}.",
            "nvidia_peermem",
        ],
    )


# --- the module (plugins/modules/rdma_modules.py runs it; module host_checks runs its checked state) ---------------

ARGUMENT_SPEC = {
    **APPLIER_ARGUMENTS,
    "mode": {"type": "str", "default": "auto", "choices": list(MODES)},
    "nccl_version": {"type": "str", "default": ""},
    "core_modules": {"type": "list", "elements": "str", "default": []},
    "extra_modules": {"type": "list", "elements": "str", "default": []},
    "interfaces": {"type": "list", "elements": "raw", "default": []},
    "hca_detect": {"type": "bool", "default": True},
    "hca_driver_map": {"type": "dict", "default": {}},
    "hca_unbound_modules": {"type": "list", "elements": "str", "default": []},
    "softdeps": {"type": "list", "elements": "raw", "default": []},
    "runtime_load": {"type": "bool"},
    "peermem_force": {"type": "bool", "default": False},
    "kallsyms": {"type": "bool", "default": True},
    "acs_clear": {"type": "bool", "default": False},
}


def run(module):
    """Module rdma_modules on ``module`` (an AnsibleModule, or host_checks' stand-in): exits through it."""
    module.run_command_environ_update = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}
    params = module.params
    host = params["host"]
    prefix = f"{host}: " if host else ""
    apply = Applier(module)

    # 1. The input, every problem at once, before anything is read or changed.
    apply.refuse(input_errors(params))

    # 2. What the host has, and whether the request can be honoured here.
    live = params["root"] == "/"
    found = assess(
        module,
        dict(params, extra_modules=interface_modules(params["interfaces"]) + params["extra_modules"]),
        host,
    )
    decision, facts, wanted, runtime = found["decision"], found["facts"], found["wanted"], found["runtime"]
    runtime["load"] = runtime["load"] and live
    probe = found["probe"]
    result = {"changed": False, "wanted": wanted, "runtime_load": runtime, "facts": facts, "changes": []}
    if decision["mode"]:
        result["gpudirect"] = {"mode": decision["mode"], "reason": decision["reason"]}
    problems = found["problems"] + gpudirect_acs.errors(params["acs_clear"], decision["mode"], params["root"], prefix)
    if problems:
        module.fail_json(msg="\n".join(problems), **result)
    for warning in decision["warnings"]:
        module.warn(warning)
    if params["state"] == "checked":
        module.exit_json(**result)

    # 3. Persist, load, then GPUDirect: only what differs.
    apply.file(LOAD_CONF, load_conf(params["header"], wanted))
    apply.file(SOFTDEP_CONF, softdep_conf(params["header"], params["softdeps"]))
    failures = []
    if runtime["load"]:
        for name in wanted:
            error = apply.load(probe["modprobe"], name, "not loaded (it is in " + LOAD_CONF + ")")
            if error:
                failures.append(f"{prefix}modprobe {name} failed: {error}")
    else:
        result["msg"] = f"{prefix}RDMA modules not loaded now: {runtime['why']}; {LOAD_CONF} loads them at boot."
    if failures:
        module.fail_json(msg="\n".join(failures), **apply.report(result))

    peermem_load = None
    if decision["mode"] == "peermem" and runtime["load"]:
        error = apply.load(probe["modprobe"], "nvidia_peermem", "GPUDirect RDMA mode peermem")
        peermem_load = {"rc": 1, "msg": error} if error else {"rc": 0}
    outcome = gpudirect_outcome(
        {"gpudirect": result.get("gpudirect"), "runtime_load": runtime, "facts": facts},
        peermem_load,
        {
            "host": host or "?",
            "mode": params["mode"],
            "force": params["peermem_force"],
            "peermem_conf": PEERMEM_CONF,
        },
    )
    peermem = peermem_conf(params["header"], params["peermem_force"]) if outcome["persist"] else None
    apply.file(PEERMEM_CONF, peermem)
    for warning in outcome["warnings"]:
        module.warn(warning)
    # ACS redirect on the GPU-NIC paths, cleared now and at every boot where the site asks (rdma_modules_acs_clear).
    result["acs"] = gpudirect_acs.apply(module, apply, params["acs_clear"], params["header"])
    record = dict(outcome["record"], acs_clear=params["acs_clear"])
    # The record also at the top: role rdma_modules registers this result as the fact gpucluster_gpudirect.
    apply.report(result, gpudirect=record, **record)
    if outcome["fatal"]:
        module.fail_json(msg=outcome["fatal"], **result)
    module.exit_json(**result)
