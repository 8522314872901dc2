# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Role rdma_core's rules: its input (every problem at once) and the locked-memory limits it writes.

Pure functions, no Ansible imports, importable on Python 3.8 targets: the module ``rdma_core`` applies them on the
node. RDMA registers (pins) memory, so a low RLIMIT_MEMLOCK makes ``ibv_reg_mr`` fail: login sessions get the limit
from pam_limits (limits.conf(5)), services from systemd's ``DefaultLimitMEMLOCK`` (systemd-system.conf(5)), which
systemd reads only when the manager starts (``systemctl daemon-reexec`` re-reads it without restarting a service).
"""

import re

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
