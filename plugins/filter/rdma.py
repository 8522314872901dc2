# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Input checks of roles rdma_core and rdma_modules (every problem as one message each, all at once), the GPUDirect
RDMA outcome and the interfaces' kernel modules; each filter is documented in <name>.yml."""

import json
import re

from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_model import interface_modules
from ansible_collections.gpucluster.fabric.plugins.module_utils.gpudirect import valid_module_name

_MEMLOCK = re.compile(r"unlimited|infinity|[0-9]+")
_UNIT_OR_PACKAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+_@:-]*")


def _names(value):
    return value if isinstance(value, (list, tuple)) else [value]


def rdma_core_input_errors(data):
    errors = []
    supported = list(data.get("supported_families") or ["Debian"])
    family = data.get("os_family")
    if family not in supported:
        errors.append(
            f"rdma_core supports {', '.join(supported)} hosts (Debian, Ubuntu); this host is"
            f" {data.get('distribution')} ({family})."
        )
    memlock = str(data.get("memlock"))
    if not _MEMLOCK.fullmatch(memlock):
        errors.append(f'rdma_core_memlock={memlock} is not a limit; use "unlimited" or a size in KiB such as 67108864.')
    for variable, kind in (("extra_packages", "package"), ("services", "unit")):
        for name in _names(data.get(variable) or []):
            if not isinstance(name, str) or not _UNIT_OR_PACKAGE.fullmatch(name):
                errors.append(
                    f"{name} in rdma_core_{variable} is not a valid {kind} name; remove it or fix its spelling."
                )
    return errors


def _softdep_problem(entry):
    if not isinstance(entry, dict) or "module" not in entry:
        return True
    return any(not isinstance(entry.get(key, []), (list, tuple)) for key in ("pre", "post"))


def rdma_modules_input_errors(data):
    """Softdep entries need a module and lists pre/post; every module name is a kernel module name."""
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
        ("rdma_modules_core", data.get("core") or []),
        ("rdma_modules_extra", data.get("extra") or []),
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
    """not-tried, loaded or failed (with the error) from the registered modprobe result (failed_when: false)."""
    if not isinstance(load, dict) or load.get("skipped") or not load:
        return "not-tried", ""
    if load.get("rc") or "exception" in load:
        return "failed", str(load.get("msg") or load.get("stderr") or "modprobe failed").strip()
    return "loaded", ""


def gpudirect_outcome(probe, load, settings):
    """GPUDirect RDMA after trying nvidia_peermem: what to record, persist, fail on and warn about.

    ``probe`` is gpudirect_facts' result, ``load`` the registered modprobe of nvidia_peermem (skipped when not
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


class FilterModule:
    def filters(self):
        return {
            "rdma_core_input_errors": rdma_core_input_errors,
            "rdma_modules_input_errors": rdma_modules_input_errors,
            "gpudirect_outcome": gpudirect_outcome,
            "rdma_interface_modules": interface_modules,
        }
