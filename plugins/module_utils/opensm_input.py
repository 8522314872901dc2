# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Every input check of role opensm in one function, so that its preflight reports all problems of a host at once.

``input_errors`` returns one message per problem, each naming the host, the one variable at fault, its allowed
values and the fix. Key variables (``opensm_m_key``, ``opensm_sm_key``, ``opensm_sa_key``) are secrets: a message
names them but never shows their value, whatever the value is. The partition inventory is checked by
``opensm_partitions.partition_errors`` and integers follow ``fabric_model.parse_int``, so that a value means the same
here as in the rest of the collection. Nothing here imports Ansible.
"""

import re

from .fabric_model import parse_int
from .opensm_partitions import (
    GUID_FIX,
    normalize_port_guid,
    partition_errors,
)

SUPPORTED_FAMILIES = ("Debian", "RedHat")
SM_GROUP = "subnet_managers"
# OpenSM's routing engines (opensm/osm_opensm.c routing_modules, doc/opensm_release_notes).
ROUTING_ENGINES = (
    "minhop",
    "updn",
    "dnup",
    "file",
    "ftree",
    "lash",
    "dor",
    "torus-2QoS",
    "nue",
    "dfsssp",
    "sssp",
    "no_fallback",
)
# opensm.conf keys that templates/opensm.conf.j2 writes from role variables; opensm_extra_options may not set them.
MANAGED_KEYS = (
    "guid",
    "sm_priority",
    "routing_engine",
    "partition_config_file",
    "part_enforce",
    "allow_both_pkeys",
    "sweep_interval",
    "m_key",
    "m_key_protection_level",
    "m_key_lease_period",
    "sm_key",
    "sa_key",
)
KEY_VARIABLES = ("opensm_m_key", "opensm_sm_key", "opensm_sa_key")
SM_PRIORITY_MAX = 15
M_KEY_PROTECTION_LEVELS = (0, 1, 2)
# OpenSM keeps m_key_lease_period in 16 bits (osm_subnet.c: opts_parse_net16).
M_KEY_LEASE_MAX = 0xFFFF

_KEY_RE = re.compile(r"^(|0[xX][0-9a-fA-F]{1,16})$")
_OPTION_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")


def _key_text(value):
    """A key variable as text for checking: vault values and YAML ints become strings (an int then fails the
    syntax check, which is right: an unquoted 0x... is not the string the template writes)."""
    return value if isinstance(value, str) else str(value)


def _platform_errors(host, facts, groups):
    errors = []
    family = (facts or {}).get("os_family")
    if family not in SUPPORTED_FAMILIES:
        errors.append(
            f"{host}: role opensm supports {', '.join(SUPPORTED_FAMILIES)} hosts; this host is "
            f"{(facts or {}).get('distribution', 'unknown')} ({family}); apply the role to a supported host"
        )
    if host not in (groups or {}).get(SM_GROUP, []):
        errors.append(
            f"{host}: role opensm runs on hosts of group {SM_GROUP}, and this host is not in it; add it to "
            f"{SM_GROUP} (its priority and port come from its host vars) or do not apply the role to it"
        )
    return errors


def _port_errors(host, inputs, hostvars, guids_by_host):
    """The bound port: opensm_port_guid, else the host's first fabric_port_guids entry (as vars/main.yml binds)."""
    wanted = inputs.get("opensm_port_guid")
    host_raw = (hostvars.get(host) or {}).get("fabric_port_guids")
    host_guids = guids_by_host.get(host, [])
    if wanted in (None, ""):
        if isinstance(host_raw, (list, tuple)) and host_raw:
            # a bad first entry is already reported by the partition check, as fabric_port_guids[0]
            return []
        if host_raw not in (None, [], ()) and not isinstance(host_raw, (list, tuple)):
            return []  # reported by the partition check: fabric_port_guids is not a list
        return [
            f"{host}: no port GUID to bind the SM to: opensm_port_guid is empty and fabric_port_guids lists no port; "
            "list the host's port GUIDs in fabric_port_guids ('ibstat -p') or set opensm_port_guid"
        ]
    try:
        guid = normalize_port_guid(wanted)
    except ValueError as exc:
        return [f"{host}: opensm_port_guid={wanted!r} is not a port GUID ({exc}); {GUID_FIX}"]
    if guid not in host_guids:
        listed = ", ".join(host_guids) if host_guids else "none"
        return [
            f"{host}: opensm_port_guid={guid} is not one of this host's fabric_port_guids ({listed}); "
            "add it to fabric_port_guids or fix the GUID"
        ]
    return []


def _int_in_range(host, name, value, low, high, fix):
    """parse_int plus a range; returns (number or None, errors)."""
    try:
        number = parse_int(value)
    except ValueError:
        number = None
    if number is None or number < low or (high is not None and number > high):
        allowed = f"{low}-{high}" if high is not None else f">= {low}"
        return None, [f"{host}: {name}={value!r} is not a whole number in {allowed}; use one in {allowed} ({fix})"]
    return number, []


def _sm_errors(host, inputs):
    errors = []
    _n, found = _int_in_range(
        host,
        "opensm_sm_priority",
        inputs.get("opensm_sm_priority"),
        0,
        SM_PRIORITY_MAX,
        "the highest priority becomes master, e.g. 14 on the master and 10 on a standby",
    )
    errors += found
    _n, found = _int_in_range(
        host, "opensm_sweep_interval", inputs.get("opensm_sweep_interval"), 1, None, "seconds between sweeps, e.g. 10"
    )
    errors += found
    engine = inputs.get("opensm_routing_engine")
    if engine is None:
        engine = ""
    if not isinstance(engine, str):
        errors.append(
            f'{host}: opensm_routing_engine={engine!r} is not a string; write a comma list such as "ftree,updn", '
            "or leave it empty for OpenSM's default (minhop)"
        )
    elif engine.strip():
        unknown = [name.strip() for name in engine.split(",") if name.strip() not in ROUTING_ENGINES]
        if unknown:
            errors.append(
                f"{host}: opensm_routing_engine={engine!r} names unknown engine(s) "
                f"{', '.join(repr(name) for name in unknown)}; use a comma list of {', '.join(ROUTING_ENGINES)}, "
                "or leave it empty for OpenSM's default (minhop)"
            )
    return errors


def _key_errors(host, inputs):
    """Key syntax and M_Key protection. Messages name the key variables but never show their values."""
    errors = []
    valid = {}
    for name in KEY_VARIABLES:
        value = inputs.get(name)
        text = "" if value is None else _key_text(value)
        if _KEY_RE.match(text):
            valid[name] = text
        else:
            errors.append(
                f"{host}: {name} is not a 64-bit key (value hidden); write it as a quoted string of 0x and 1-16 "
                "hex digits, from ansible-vault, or leave it empty"
            )
    level, found = _int_in_range(
        host,
        "opensm_m_key_protection_level",
        inputs.get("opensm_m_key_protection_level"),
        0,
        max(M_KEY_PROTECTION_LEVELS),
        "0 off, 1 Set needs the M_Key, 2 Get and Set need it",
    )
    errors += found
    lease, found = _int_in_range(
        host,
        "opensm_m_key_lease_period",
        inputs.get("opensm_m_key_lease_period"),
        0,
        M_KEY_LEASE_MAX,
        "seconds; a few sweep intervals, e.g. 60",
    )
    errors += found
    if level:
        m_key = valid.get("opensm_m_key")
        if m_key is not None and (m_key == "" or int(m_key, 16) == 0):
            errors.append(
                f"{host}: opensm_m_key_protection_level={level} needs a non-zero opensm_m_key; set the key (from "
                "ansible-vault) or use protection level 0"
            )
        if lease == 0:
            errors.append(
                f"{host}: opensm_m_key_lease_period=0 never expires, so with opensm_m_key_protection_level={level} a "
                "port whose SM is gone stays locked for ever; use a lease of a few sweep intervals, e.g. 60"
            )
    return errors


def _extra_option_errors(host, extra):
    if extra is None:
        return []
    if not isinstance(extra, dict):
        return [f"{host}: opensm_extra_options={extra!r} is not a mapping; write e.g. {{lmc: 0, max_op_vls: 5}}"]
    errors = []
    for key in extra:
        if key in MANAGED_KEYS:
            errors.append(
                f"{host}: opensm_extra_options.{key} is set by the role itself (opensm_{key} or the partition "
                "inventory); remove it from opensm_extra_options and use that variable"
            )
        elif not isinstance(key, str) or not _OPTION_NAME_RE.match(key):
            errors.append(
                f"{host}: opensm_extra_options key {key!r} is not an opensm.conf key (lowercase letters, digits and "
                "'_'); remove it or fix its spelling ('opensm -c /tmp/x' lists the keys)"
            )
    return errors


def input_errors(inputs, hostvars, groups, host, facts=None):
    """Every problem with role opensm's inputs on ``host``, as a list of messages (empty when all is well).

    ``inputs`` maps the role's variable names (``opensm_partitions``, ``opensm_sm_priority``, ...) to their values;
    ``hostvars`` and ``groups`` are the magic variables (``fabric_port_guids`` and ``fabric_interfaces`` of every
    host are read from hostvars); ``facts`` gives ``os_family`` and ``distribution``.
    """
    inputs = inputs or {}
    hostvars = hostvars or {}
    errors = _platform_errors(host, facts, groups)
    model, found = partition_errors(
        inputs.get("opensm_partitions"), hostvars, groups, inputs.get("opensm_default_partition"), host
    )
    errors += found
    errors += _port_errors(host, inputs, hostvars, model["guids_by_host"])
    errors += _sm_errors(host, inputs)
    errors += _key_errors(host, inputs)
    errors += _extra_option_errors(host, inputs.get("opensm_extra_options"))
    return errors
