# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""GPUDirect RDMA: which of DMA-BUF, nvidia-peermem or nothing a host can use.

Pure functions, no Ansible imports: parsers for what the kernel and dpkg print, a reader that takes every path
relative to a root directory (so tests and sites can point it at a captured tree), and ``decide()``, which turns the
gathered facts into ``{mode, reason}``. The rules are those of the collection's FACTS page:

- DMA-BUF needs kernel >= 5.12, rdma-core >= 34, NCCL >= 2.13 and the open GPU kernel modules.
- nvidia-peermem needs the PeerDirect API that only the MLNX_OFED/DOCA ib_core exports
  (``ib_register_peer_memory_client``); on the inbox ib_core it fails to load with "Invalid argument".
- Without an NVIDIA kernel driver there is no GPUDirect RDMA at all.
"""

import os
import re

from . import pcie
from .dpkg import parse_status as parse_dpkg_status
from .fabric_model import version_tuple

MODES = ("auto", "peermem", "dmabuf", "none")
MIN_KERNEL_DMABUF = (5, 12)
MIN_RDMA_CORE_DMABUF = 34
MIN_NCCL_DMABUF = (2, 13)
PEER_MEMORY_SYMBOL = "ib_register_peer_memory_client"
# MLNX_OFED 23.04 and later number their rdma-core by release date (2307mlnx47 = July 2023); all of them
# postdate upstream rdma-core 34 (2021), so a date-coded major counts as new enough.
DATE_CODED_RDMA_CORE = 1000
RDMA_CORE_PACKAGES = ("rdma-core", "libibverbs1")
NCCL_PACKAGES = ("libnccl2",)
OFED_PACKAGE_PREFIXES = ("mlnx-ofed-kernel", "doca-ofed", "mlnx-ofed-all", "mlnx-ofed-basic")
MODULE_NAME_RE = re.compile(r"[A-Za-z0-9_-]+")
_KO_SUFFIX_RE = re.compile(r"\.ko(\.(xz|zst|gz))?$")


def known_version(text):
    """``version_tuple`` of a version read from the host, or None when it is absent or not a version."""
    try:
        return version_tuple(text)
    except ValueError:
        return None


def version_text(parts):
    return ".".join(str(part) for part in parts)


def module_name(name):
    """Kernel module names treat '-' and '_' alike; the kernel itself reports '_'."""
    return name.replace("-", "_")


def valid_module_name(name):
    return bool(MODULE_NAME_RE.fullmatch(name or ""))


# --- parsers -------------------------------------------------------------------------------------------------


def parse_proc_version(text):
    """Kernel release from /proc/version ('Linux version 6.1.0-18-amd64 (...) ...')."""
    match = re.match(r"^Linux version (\S+)", text or "")
    return match.group(1) if match else None


def parse_nvidia_version(text):
    """/proc/driver/nvidia/version -> {version, open, arch} or None.

    Open:        'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (...)'
    Proprietary: 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023'
    """
    for line in (text or "").splitlines():
        if not line.startswith("NVRM version:"):
            continue
        match = re.search(r"NVIDIA UNIX (Open Kernel Module for (\S+)|(\S+) Kernel Module)\s+(\d+(?:\.\d+)+)", line)
        if not match:
            return None
        return {
            "version": match.group(4),
            "open": match.group(2) is not None,
            "arch": match.group(2) or match.group(3),
        }
    return None


def debian_upstream_version(version):
    """'1:44.0-2' -> '44.0'; '2.28.3-1+cuda13.0' -> '2.28.3'."""
    version = version.split(":", 1)[-1]
    return version.rsplit("-", 1)[0] if "-" in version else version


def parse_nccl_version(text):
    """NCCL version from a Debian version, a plain version or an ncclGetVersion() code -> (major, minor, patch)."""
    text = str(text or "").strip()
    if re.match(r"^\d{5,}$", text):
        # ncclGetVersion() since 2.9: major * 10000 + minor * 100 + patch (22809 -> 2.28.9).
        code = int(text)
        return (code // 10000, code % 10000 // 100, code % 100)
    parts = known_version(debian_upstream_version(text)) if text else None
    return parts if parts and len(parts) >= 2 else None


def parse_modules_dep(text):
    """modules.dep -> {module name: path relative to /lib/modules/<release>}."""
    modules = {}
    for line in (text or "").splitlines():
        path = line.split(":", 1)[0].strip()
        if not path:
            continue
        base = os.path.basename(path)
        if _KO_SUFFIX_RE.search(base):
            modules.setdefault(module_name(_KO_SUFFIX_RE.sub("", base)), path)
    return modules


def parse_proc_modules(text):
    """/proc/modules -> {name: taint flags} ('nvidia 14299136 - - Live 0xffffffffc0400000 (O)' -> {'nvidia': 'O'})."""
    modules = {}
    for line in (text or "").splitlines():
        fields = line.split()
        if not fields:
            continue
        flags = fields[-1][1:-1] if fields[-1].startswith("(") else ""
        modules[fields[0]] = flags
    return modules


def kallsyms_has(text_lines, symbol):
    """Whether /proc/kallsyms (an iterable of lines) names a symbol ('ffffffffc0a1b2c3 T name\t[ib_core]')."""
    for line in text_lines:
        fields = line.split()
        if len(fields) >= 3 and fields[2] == symbol:
            return True
    return False


def rdma_core_major(version):
    """Debian version of rdma-core/libibverbs1 -> upstream major ('44.0-2' -> 44, '2307mlnx47-1.2310036' -> 2307)."""
    match = re.match(r"^(\d+)", debian_upstream_version(version or ""))
    return int(match.group(1)) if match else None


# --- reading a (possibly captured) root tree ---------------------------------------------------------------


class RootTree:
    """Reads files below a root directory ('/' for the live system)."""

    def __init__(self, root="/"):
        self.root = root

    def path(self, relpath):
        return os.path.join(self.root, relpath.lstrip("/"))

    def read(self, relpath):
        try:
            with open(self.path(relpath), encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except OSError:
            return None

    def exists(self, relpath):
        return os.path.lexists(self.path(relpath))

    def listdir(self, relpath):
        try:
            return sorted(os.listdir(self.path(relpath)))
        except OSError:
            return []

    def link_name(self, relpath):
        try:
            return os.path.basename(os.readlink(self.path(relpath)))
        except OSError:
            return None

    def lines(self, relpath):
        try:
            with open(self.path(relpath), encoding="utf-8", errors="replace") as handle:
                yield from handle
        except OSError:
            return


def kernel_module_state(tree, name, proc_modules, modules_dep):
    """loaded | builtin | available | missing for one module, with its taint flags and on-disk path."""
    name = module_name(name)
    sysdir = "sys/module/" + name
    taint = (tree.read(sysdir + "/taint") or "").strip()
    if name in proc_modules or tree.exists(sysdir + "/initstate"):
        state = "loaded"
        taint = taint or proc_modules.get(name, "")
    elif tree.exists(sysdir):
        # Built-in modules have a /sys/module entry (when they have parameters or a version) but no initstate.
        state = "builtin"
    elif name in modules_dep:
        state = "available"
    else:
        state = "missing"
    return {"state": state, "taint": taint, "path": modules_dep.get(name)}


def gather(root="/", nccl_version=None, kallsyms=True, runtime_probe=None):
    """Collect the facts decide() needs from a root tree.

    runtime_probe: optional dict of what only the live system can tell (modprobe path, ofed_info -s output,
    modinfo license of nvidia.ko); the module fills it when root is '/'.
    """
    tree = RootTree(root)
    runtime_probe = runtime_probe or {}

    release = (tree.read("proc/sys/kernel/osrelease") or "").strip() or parse_proc_version(tree.read("proc/version"))
    proc_modules_text = tree.read("proc/modules")
    proc_modules = parse_proc_modules(proc_modules_text)
    modules_dep = parse_modules_dep(tree.read(f"lib/modules/{release}/modules.dep") if release else None)
    packages = parse_dpkg_status(tree.read("var/lib/dpkg/status"))

    # rdma-core: the rdma-core package, else libibverbs1 (same source package; minimal images carry only that).
    rdma_core = None
    for package in RDMA_CORE_PACKAGES:
        if package in packages:
            version = packages[package]["version"]
            rdma_core = {"package": package, "version": version, "major": rdma_core_major(version)}
            break

    # ib_core: in use (loaded/built in) beats on disk; out-of-tree (taint O, updates/ or extra/) means MLNX_OFED/DOCA.
    ib_core = kernel_module_state(tree, "ib_core", proc_modules, modules_dep)
    ofed_packages = {name: info["version"] for name, info in packages.items() if name.startswith(OFED_PACKAGE_PREFIXES)}
    peer_api = None
    evidence = []
    if ib_core["state"] in ("loaded", "builtin") and kallsyms:
        peer_api = (
            kallsyms_has(tree.lines("proc/kallsyms"), PEER_MEMORY_SYMBOL) if tree.exists("proc/kallsyms") else None
        )
        if peer_api is not None:
            evidence.append(
                "{} {} in /proc/kallsyms".format(PEER_MEMORY_SYMBOL, "present" if peer_api else "absent"),
            )
    if ib_core["state"] == "loaded":
        out_of_tree = "O" in ib_core["taint"]
        evidence.append("loaded ib_core is %s" % ("out-of-tree (taint O)" if out_of_tree else "in-tree"))
    elif ib_core["state"] == "builtin":
        out_of_tree = False
        evidence.append("ib_core is built into the kernel")
    elif ib_core["state"] == "available":
        out_of_tree = not ib_core["path"].startswith("kernel/")
        evidence.append("modprobe would load {}".format(ib_core["path"]))
    else:
        out_of_tree = None
        evidence.append(f"no ib_core module for kernel {release}")
    if peer_api:
        source = "mlnx_ofed"
    elif peer_api is False and ib_core["state"] in ("loaded", "builtin"):
        source = "inbox"
    elif out_of_tree is None:
        source = "absent"
    else:
        source = "mlnx_ofed" if out_of_tree else "inbox"
    ofed_info = (runtime_probe.get("ofed_info") or "").strip() or None
    if ofed_packages:
        evidence.append(
            "OFED packages: " + ", ".join("{} {}".format(*item) for item in sorted(ofed_packages.items())),
        )
    if ofed_info:
        evidence.append("ofed_info -s: " + ofed_info)

    # NVIDIA kernel driver: the loaded one (/proc/driver/nvidia/version) or one modprobe could load.
    nvidia_version = parse_nvidia_version(tree.read("proc/driver/nvidia/version"))
    nvidia_module = kernel_module_state(tree, "nvidia", proc_modules, modules_dep)
    if nvidia_version:
        nvidia = {
            "present": True,
            "loaded": True,
            "version": nvidia_version["version"],
            "open": nvidia_version["open"],
            "evidence": "/proc/driver/nvidia/version",
        }
    elif nvidia_module["state"] != "missing":
        license_text = (runtime_probe.get("nvidia_license") or "").strip()
        # open-gpu-kernel-modules: MODULE_LICENSE("Dual MIT/GPL"); the proprietary module: "NVIDIA".
        is_open = {"Dual MIT/GPL": True, "NVIDIA": False}.get(license_text)
        nvidia = {
            "present": True,
            "loaded": nvidia_module["state"] in ("loaded", "builtin"),
            "version": (tree.read("sys/module/nvidia/version") or "").strip() or None,
            "open": is_open,
            "evidence": "nvidia module {} ({})".format(nvidia_module["state"], nvidia_module["path"] or "sysfs"),
        }
    else:
        nvidia = {"present": False, "loaded": False, "version": None, "open": None, "evidence": None}

    peermem_module = kernel_module_state(tree, "nvidia_peermem", proc_modules, modules_dep)
    peermem = {
        "loaded": peermem_module["state"] in ("loaded", "builtin"),
        "available": peermem_module["state"] != "missing",
        "path": peermem_module["path"],
        "persisted_in": files_loading_module(tree, "nvidia_peermem"),
    }

    if nccl_version:
        nccl = {"version": version_text(parse_nccl_version(nccl_version) or ()), "source": "given"}
    else:
        nccl = {"version": None, "source": None}
        for package in NCCL_PACKAGES:
            if package in packages:
                parsed = parse_nccl_version(packages[package]["version"])
                if parsed:
                    nccl = {"version": version_text(parsed), "source": f"dpkg {package}"}
                break

    return {
        "kernel": {"release": release},
        "rdma_core": rdma_core,
        "ib_core": {
            "state": ib_core["state"],
            "source": source,
            "peer_memory_api": peer_api,
            "ofed_packages": ofed_packages,
            "ofed_info": ofed_info,
            "evidence": "; ".join(evidence),
        },
        "nvidia": nvidia,
        "peermem": peermem,
        "nccl": nccl,
        "runtime_load": runtime_load_possible(tree, proc_modules_text, runtime_probe),
        "hca": pci_rdma_devices(tree),
    }


MODULES_LOAD_DIRS = (
    "etc/modules-load.d",
    "run/modules-load.d",
    "usr/local/lib/modules-load.d",
    "usr/lib/modules-load.d",
)


def files_loading_module(tree, name):
    """modules-load.d files (and Debian's /etc/modules) that load a module at boot."""
    candidates = ["etc/modules"]
    for directory in MODULES_LOAD_DIRS:
        candidates.extend(directory + "/" + entry for entry in tree.listdir(directory) if entry.endswith(".conf"))
    found = []
    for relpath in candidates:
        for line in (tree.read(relpath) or "").splitlines():
            words = line.split("#", 1)[0].split(";", 1)[0].split()
            if words and module_name(words[0]) == module_name(name):
                found.append("/" + relpath)
                break
    return found


def runtime_load_possible(tree, proc_modules_text, runtime_probe):
    """Whether modules can be loaded here now: {possible, reason}."""
    if proc_modules_text is None:
        return {"possible": False, "reason": "/proc/modules is absent (kernel without loadable module support)"}
    if (tree.read("proc/sys/kernel/modules_disabled") or "").strip() == "1":
        return {"possible": False, "reason": "kernel.modules_disabled=1 (module loading is locked until reboot)"}
    for marker in ("run/.containerenv", ".dockerenv", "run/systemd/container"):
        if tree.exists(marker):
            return {"possible": False, "reason": f"running in a container (/{marker}): modules belong to the host"}
    if "modprobe" in runtime_probe and not runtime_probe["modprobe"]:
        return {"possible": False, "reason": "modprobe is not installed (Debian/Ubuntu package kmod)"}
    return {"possible": True, "reason": "/proc/modules present, module loading enabled, not a container"}


def pci_rdma_devices(tree):
    """Network controllers from NVIDIA/Mellanox on the PCI bus, with the driver bound to each
    (pcie.nvidia_network_functions)."""
    keys = ("address", "vendor", "device", "class", "driver")
    return [{key: device[key] for key in keys} for device in pcie.nvidia_network_functions(tree.root)]


def hca_modules(devices, driver_map, unbound_default):
    """Kernel modules the HCAs need: by bound driver through driver_map, else unbound_default."""
    wanted = []
    for device in devices:
        names = driver_map.get(device["driver"]) if device["driver"] else unbound_default
        for name in names or []:
            if name not in wanted:
                wanted.append(name)
    return wanted


def wanted_modules(core, adapters, extra):
    """Every module the host loads, in load order, '-' spelled '_' as the kernel reports them, each once."""
    wanted = []
    for name in [*core, *adapters, *extra]:
        name = module_name(name)
        if name not in wanted:
            wanted.append(name)
    return wanted


def runtime_load(requested, possible):
    """Whether the modules are loaded now: the inventory's choice, else whether this host allows it."""
    if requested is None or requested == "":
        return {"load": bool(possible["possible"]), "why": possible["reason"]}
    load = str(requested).strip().lower() in ("1", "true", "yes", "on", "y", "t")
    return {"load": load, "why": f"rdma_modules_runtime_load={'true' if load else 'false'}"}


def dry_run_error(wanted, kernel_release, stderr):
    return (
        f"modprobe cannot load {' '.join(wanted)} on kernel {kernel_release}: {(stderr or '').strip()}."
        " Install the kernel's module package, remove the module from rdma_modules_extra, or set"
        " rdma_modules_runtime_load=false to only write the persistent configuration."
    )


# --- the decision ------------------------------------------------------------------------------------------


def dmabuf_unmet(facts):
    """Requirements of DMA-BUF the host does not meet (empty when it can use it)."""
    unmet = []
    release = facts["kernel"]["release"]
    kernel = known_version(release)
    if kernel is None:
        unmet.append(f"kernel version unknown (need >= {version_text(MIN_KERNEL_DMABUF)})")
    elif kernel[:2] < MIN_KERNEL_DMABUF:
        unmet.append(f"kernel {release} < {version_text(MIN_KERNEL_DMABUF)}")
    rdma_core = facts["rdma_core"]
    if not rdma_core or rdma_core["major"] is None:
        unmet.append(f"rdma-core not installed (need >= {MIN_RDMA_CORE_DMABUF})")
    elif rdma_core["major"] < MIN_RDMA_CORE_DMABUF:
        unmet.append(f"rdma-core {debian_upstream_version(rdma_core['version'])} < {MIN_RDMA_CORE_DMABUF}")
    nvidia = facts["nvidia"]
    if nvidia["open"] is False:
        unmet.append(
            f"NVIDIA kernel module {nvidia['version'] or ''} is the proprietary one"
            " (need the open GPU kernel modules, default since R560)"
        )
    elif nvidia["open"] is None:
        unmet.append("NVIDIA kernel module flavour unknown (driver not loaded; need the open GPU kernel modules)")
    nccl = parse_nccl_version(facts["nccl"]["version"])
    if nccl is not None and nccl[:2] < MIN_NCCL_DMABUF:
        unmet.append(f"NCCL {facts['nccl']['version']} < {version_text(MIN_NCCL_DMABUF)}")
    return unmet


def dmabuf_basis(facts):
    """Why DMA-BUF works here, in one line."""
    nccl = facts["nccl"]
    minimum = version_text(MIN_NCCL_DMABUF)
    if nccl["version"]:
        nccl_text = f"NCCL {nccl['version']} >= {minimum} ({nccl['source']})"
    else:
        nccl_text = f"NCCL version unknown: the NCCL the jobs use must be >= {minimum}"
    return (
        f"kernel {facts['kernel']['release']} >= {version_text(MIN_KERNEL_DMABUF)}, "
        f"rdma-core {debian_upstream_version(facts['rdma_core']['version'])} >= {MIN_RDMA_CORE_DMABUF}, "
        f"open NVIDIA kernel module {facts['nvidia']['version'] or ''}, {nccl_text}"
    )


def peermem_blockers(facts):
    """Why nvidia-peermem cannot load here (empty when it can)."""
    blockers = []
    ib_core = facts["ib_core"]
    release = facts["kernel"]["release"]
    if ib_core["source"] == "inbox":
        text = f"ib_core is the inbox one, without the PeerDirect API ({ib_core['evidence']})"
        if ib_core["ofed_packages"] or ib_core["ofed_info"]:
            text += (
                "; MLNX_OFED/DOCA is installed but its ib_core is not the one in use:"
                f" rebuild or reinstall it for kernel {release}"
            )
        blockers.append(text)
    elif ib_core["source"] == "absent":
        blockers.append(f"no ib_core module for kernel {release}")
    peermem = facts["peermem"]
    if not (peermem["loaded"] or peermem["available"]):
        blockers.append(f"no nvidia-peermem.ko for kernel {release} (it ships with the NVIDIA driver since R470)")
    return blockers


def decide(facts, requested="auto"):
    """GPUDirect RDMA mode for a host: {mode, reason, errors, warnings}.

    errors: the request cannot be honoured at all (preflight must fail); warnings: it can, against the facts.
    """
    if requested not in MODES:
        return {
            "mode": None,
            "reason": None,
            "errors": ["unknown GPUDirect mode {!r}; use one of {}".format(requested, ", ".join(MODES))],
            "warnings": [],
        }
    nvidia = facts["nvidia"]
    result = {"mode": None, "reason": None, "errors": [], "warnings": []}

    if requested == "none":
        result.update(mode="none", reason="GPUDirect RDMA turned off by request (mode none)")
        return result

    if not nvidia["present"]:
        why = (
            "no NVIDIA kernel driver: /proc/driver/nvidia/version is absent"
            f" and no nvidia module exists for kernel {facts['kernel']['release']}"
        )
        if requested == "auto":
            result.update(mode="none", reason=why)
        else:
            result["errors"].append(
                f"GPUDirect mode {requested} was requested but there is {why};"
                " install the NVIDIA driver first, or use mode auto or none"
            )
        return result

    unmet = dmabuf_unmet(facts)
    blockers = peermem_blockers(facts)

    if requested == "dmabuf":
        if unmet:
            result["warnings"].append("DMA-BUF requested but not supported here: " + "; ".join(unmet))
            result.update(mode="dmabuf", reason="DMA-BUF by request, although " + "; ".join(unmet))
        else:
            result.update(mode="dmabuf", reason="DMA-BUF by request: " + dmabuf_basis(facts))
        return result

    if requested == "peermem":
        if blockers:
            result["warnings"].append("nvidia-peermem requested but it cannot load here: " + "; ".join(blockers))
            result.update(mode="peermem", reason="nvidia-peermem by request, although " + "; ".join(blockers))
        else:
            result.update(
                mode="peermem",
                reason="nvidia-peermem by request: ib_core has PeerDirect ({})".format(facts["ib_core"]["evidence"]),
            )
        return result

    # auto: DMA-BUF is NVIDIA's recommended path; nvidia-peermem only where DMA-BUF is out of reach.
    if not unmet:
        reason = "DMA-BUF: " + dmabuf_basis(facts)
        if not blockers:
            reason += " (nvidia-peermem would work too; DMA-BUF is NVIDIA's recommended path)"
        result.update(mode="dmabuf", reason=reason)
    elif not blockers:
        result.update(
            mode="peermem",
            reason=f"nvidia-peermem: DMA-BUF is not possible ({'; '.join(unmet)})"
            f" and ib_core is MLNX_OFED/DOCA with PeerDirect ({facts['ib_core']['evidence']})",
        )
    else:
        result.update(
            mode="none",
            reason=f"no GPUDirect RDMA: DMA-BUF is not possible ({'; '.join(unmet)})"
            f" and nvidia-peermem is not possible ({'; '.join(blockers)})",
        )
    return result


def probe_problems(errors, load_errors, mode, host=""):
    """Why the requested GPUDirect mode cannot be honoured, then the module-loading errors; each line names the host
    (when given) and the variable."""
    prefix = f"{host}: " if host else ""
    return [f"{prefix}rdma_modules_gpudirect_mode={mode}: {error}" for error in errors or []] + [
        f"{prefix}{error}" for error in load_errors or []
    ]


# --- the live system (``module``: an AnsibleModule; only its get_bin_path and run_command are used) ---------------


def live_probe(module):
    """What only commands on the live system can tell: modprobe's path, ``ofed_info -s``, nvidia.ko's license."""
    probe = {"modprobe": module.get_bin_path("modprobe", opt_dirs=["/usr/sbin", "/sbin"])}
    ofed_info = module.get_bin_path("ofed_info", opt_dirs=["/usr/bin", "/usr/sbin"])
    if ofed_info:
        rc, out, _err = module.run_command([ofed_info, "-s"])
        probe["ofed_info"] = out.strip().rstrip(":") if rc == 0 else None
    modinfo = module.get_bin_path("modinfo", opt_dirs=["/usr/sbin", "/sbin"])
    if modinfo:
        rc, out, _err = module.run_command([modinfo, "-F", "license", "nvidia"])
        probe["nvidia_license"] = out.strip() if rc == 0 else None
    return probe


def load_errors(module, probe, wanted, kernel_release):
    """``modprobe --dry-run`` of every wanted module: [] when all can be loaded, else the error with the fix."""
    if not wanted:
        return []
    if probe.get("modprobe"):
        rc, _out, err = module.run_command([probe["modprobe"], "--dry-run", "--all", *wanted])
    else:
        rc, err = 1, "modprobe is not installed (Debian/Ubuntu package kmod)"
    return [dry_run_error(wanted, kernel_release, err)] if rc != 0 else []


def assess(module, params, host=""):
    """What decides GPUDirect RDMA and module loading on this host, and the problems of honouring ``params``.

    ``params``: root, mode, nccl_version, kallsyms, core_modules, hca_detect, hca_driver_map, hca_unbound_modules,
    extra_modules (the interfaces' modules included), runtime_load, as modules gpudirect_facts and rdma_modules take
    them. Commands (``modprobe --dry-run`` and the live probe) run only when root is "/".
    Returns {facts, decision, adapters, wanted, runtime, load_errors, problems}.
    """
    probe = live_probe(module) if params["root"] == "/" else None
    facts = gather(params["root"], params["nccl_version"] or None, params["kallsyms"], probe)
    decision = decide(facts, params["mode"])
    adapters = hca_modules(facts["hca"], params["hca_driver_map"], params["hca_unbound_modules"])
    wanted = wanted_modules(params["core_modules"], adapters if params["hca_detect"] else [], params["extra_modules"])
    runtime = runtime_load(params["runtime_load"], facts["runtime_load"])
    found = load_errors(module, probe, wanted, facts["kernel"]["release"]) if runtime["load"] and probe else []
    return {
        "facts": facts,
        "decision": decision,
        "adapters": adapters,
        "wanted": wanted,
        "runtime": runtime,
        "load_errors": found,
        "problems": probe_problems(decision["errors"], found, params["mode"], host),
        "probe": probe,
    }
