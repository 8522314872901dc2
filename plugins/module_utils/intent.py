# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The intent of one host as a file on that host (``/etc/gpucluster/fabric.json``), which the node can later be
checked against without the inventory.

The document is what the site preflight computed (action plugin gpucluster.fabric.preflight): for each role the host
gets, what its applier is to make true, defaulted and templated. It never holds a secret: OpenSM's keys are left out
where it is built, and any URL's user and password are masked here. Standard library only (Python 3.8 targets).
"""

import json
import re

PATH = "/etc/gpucluster/fabric.json"
MODE = 0o600  # root's only: the intent names the fabric's layout
SCHEMA = 1
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")


def redact(value):
    """``value`` with every ``scheme://user:password@`` in its strings masked as ``scheme://***@``."""
    if isinstance(value, str):
        return _USERINFO.sub(r"\g<scheme>***@", value)
    if isinstance(value, dict):
        return {key: redact(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(item) for item in value]
    return value


def document(host, roles):
    """The intent document of ``host``: {schema, host, roles: {role: intent}}, and ``masked``: the roles whose part
    had a URL's user and password masked (module apply makes their arguments from the variables instead)."""
    parts = {role: redact(part) for role, part in dict(roles).items()}
    masked = sorted(role for role, part in parts.items() if part != roles[role])
    return {"schema": SCHEMA, "host": host, "roles": parts, **({"masked": masked} if masked else {})}


def render(intent):
    """The file's text: stable (sorted keys), so that a re-run with the same inventory changes nothing."""
    return json.dumps(intent, indent=2, sort_keys=True, default=str) + "\n"


def errors(intent):
    """What makes ``intent`` unusable as the host's intent file."""
    if not isinstance(intent, dict):
        return [
            "no intent: run gpucluster.fabric.preflight earlier in the same run (site.yml does); it returns the fact"
            " gpucluster_fabric_intent"
        ]
    problems = []
    if intent.get("schema") != SCHEMA:
        problems.append(f"intent schema {intent.get('schema')!r} is not {SCHEMA}")
    if not isinstance(intent.get("roles"), dict):
        problems.append("intent has no roles mapping")
    return problems
