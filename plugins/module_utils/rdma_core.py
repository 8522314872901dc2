# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Role rdma_core's rules: its input (every problem at once) and the locked-memory limits it writes.

No Ansible imports, importable on Python 3.8 targets: ``run`` is module ``rdma_core`` (and its step of module
``apply``) on the node. RDMA registers (pins) memory, so a low RLIMIT_MEMLOCK makes ``ibv_reg_mr`` fail: login
sessions get the limit from pam_limits (limits.conf(5)), services from systemd's ``DefaultLimitMEMLOCK``
(systemd-system.conf(5)), which systemd reads only when the manager starts (``systemctl daemon-reexec`` re-reads it
without restarting a service).
"""

import re

from . import dpkg
from .applier import ARGUMENT_SPEC as APPLIER_ARGUMENTS
from .applier import Applier

LIMITS_CONF = "/etc/security/limits.d/90-gpucluster-rdma-memlock.conf"
SYSTEMD_CONF = "/etc/systemd/system.conf.d/90-gpucluster-rdma-memlock.conf"

_MEMLOCK = re.compile(r"unlimited|infinity|[0-9]+")
_UNIT_OR_PACKAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+_@:-]*")


def _names(value):
    return value if isinstance(value, (list, tuple)) else [value]


def input_errors(data):
    """Every problem of the input; ``data``: the options of module rdma_core."""
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


def _text(header, lines):
    return (header.rstrip("\n") + "\n" if header else "") + "".join(line + "\n" for line in lines)


def limits_conf(header, memlock):
    """limits.d file: the memlock limit (KiB or unlimited) of every login session, root's included."""
    memlock = str(memlock)
    lines = ["# RDMA registers (pins) memory; a low RLIMIT_MEMLOCK makes ibv_reg_mr fail."]
    for who in ("*    ", "root "):
        lines += [f"{who} soft  memlock  {memlock}", f"{who} hard  memlock  {memlock}"]
    return _text(header, lines)


def systemd_limit(memlock):
    """DefaultLimitMEMLOCK= of a limit in KiB (or unlimited/infinity): systemd takes bytes."""
    memlock = str(memlock)
    return "infinity" if memlock in ("unlimited", "infinity") else str(int(memlock) * 1024)


def systemd_conf(header, memlock):
    """system.conf.d drop-in: the same limit for every service."""
    lines = [
        "# RDMA registers (pins) memory; services need the same limit as login sessions.",
        "[Manager]",
        f"DefaultLimitMEMLOCK={systemd_limit(memlock)}",
    ]
    return _text(header, lines)


# Module rdma_core's options (documented in plugins/modules/rdma_core.py).
ARGUMENT_SPEC = {
    **APPLIER_ARGUMENTS,
    "os_family": {"type": "str", "required": True},
    "distribution": {"type": "str", "default": ""},
    "supported_families": {"type": "list", "elements": "str", "default": ["Debian"]},
    "memlock": {"type": "str", "default": "unlimited"},
    "memlock_pam": {"type": "bool", "default": True},
    "memlock_systemd": {"type": "bool", "default": True},
    "extra_packages": {"type": "list", "elements": "raw", "default": []},
    "services": {"type": "list", "elements": "raw", "default": []},
    "packages": {"type": "list", "elements": "raw", "default": []},
}


def run(module):
    """Module rdma_core: the input checked, then the memlock limits written where they differ."""
    params = module.params
    apply = Applier(module)
    apply.refuse(input_errors(params))
    result = {"changed": False, "changes": [], **dpkg.apt_state(apply.path, params["packages"])}
    if params["state"] == "checked":
        module.exit_json(**result)

    memlock, header = params["memlock"], params["header"]
    apply.file(LIMITS_CONF, limits_conf(header, memlock) if params["memlock_pam"] else None)
    before = len(apply.changes)
    apply.file(SYSTEMD_CONF, systemd_conf(header, memlock) if params["memlock_systemd"] else None)
    if len(apply.changes) > before and params["root"] == "/":
        # systemd reads DefaultLimitMEMLOCK only when the manager starts; services started afterwards get it.
        apply.changes.append({"what": "systemd", "why": "daemon-reexec, to read " + SYSTEMD_CONF})
        if not module.check_mode:
            module.run_command([module.get_bin_path("systemctl", required=True), "daemon-reexec"], check_rc=True)
    module.exit_json(**apply.report(result))
