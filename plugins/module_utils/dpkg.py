# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""What dpkg says is installed, read from its status file (dpkg(1), FILES): one reader for every module that asks.

Pure functions, no Ansible imports, importable on Python 3.8 targets.
"""

import glob
import os
import re

STATUS = "/var/lib/dpkg/status"
APT_LISTS = "/var/lib/apt/lists"
# A plain package name (deb-control(5), Package field); anything else (a version, a wildcard) is left to apt.
_PLAIN_NAME = re.compile(r"[a-z0-9][a-z0-9.+-]+")


def parse_status(text):
    """Installed packages from /var/lib/dpkg/status (or `dpkg-query --status`): {name: {version, status}}."""
    packages = {}
    for stanza in re.split(r"\n\s*\n", text or ""):
        fields = {}
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t") or ":" not in line:
                continue
            key, _sep, value = line.partition(":")
            fields[key.strip()] = value.strip()
        name = fields.get("Package")
        status = fields.get("Status", "").split()
        # "install ok installed" or, for a held package, "hold ok installed".
        if name and status[-1:] == ["installed"]:
            packages[name] = {"version": fields.get("Version", ""), "status": " ".join(status)}
    return packages


def not_installed(installed, names):
    """The names of ``names`` that apt must still see: not installed, or not a plain package name (a version or a
    pattern, which only apt can judge)."""
    return [
        name for name in names if not (isinstance(name, str) and _PLAIN_NAME.fullmatch(name)) or name not in installed
    ]


def apt_state(path, names):
    """What an applier reports before the role's apt task: ``packages_missing`` (of ``names``, from dpkg's status
    file) and ``apt_indexes`` (whether apt has package indexes yet); ``path`` maps a host path to where it is read."""
    try:
        with open(path(STATUS), encoding="utf-8") as handle:
            installed = parse_status(handle.read())
    except FileNotFoundError:  # not a Debian host: every package is apt's (or dnf's) to judge
        installed = {}
    return {
        "packages_missing": not_installed(installed, names),
        "apt_indexes": bool(glob.glob(os.path.join(path(APT_LISTS), "*_Packages*"))),
    }
