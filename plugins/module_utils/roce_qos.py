# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""RoCEv2 lossless host QoS: the settings of each RoCE interface, their validation, and what applying them means.

A RoCE fabric is lossless only when every host marks its RDMA traffic with the DSCP the switches queue losslessly,
trusts DSCP on receive, pauses (PFC) on the priority that DSCP maps to and lets ECN mark it; RDMA-CM's default ToS
and NCCL's traffic class must agree. The conventions (DSCP 26 -> priority 3, CNP DSCP 48 -> priority 6, ToS 106 =
DSCP 26 << 2 | ECT(0)) are those of NVIDIA's RoCE configuration guides and of NVIDIA's Kubernetes network operator.

Pure functions: what the inventory asks for and whether it holds together. roce_qos_apply.py reads the live state,
compares and writes (module ``roce_qos``, the boot-time unit, and fabric_validate's read-back in check mode).
"""

import json

from .fabric_model import is_int, normalise_interface, parse_bool
from .node_library import LIBRARY

PRIORITIES = tuple(range(8))
DSCP_MAX = 63
TOS_MAX = 255
TRUST_MODES = ("dscp", "pcp")
# ECN codepoints of the ToS byte's two low bits (RFC 3168).
ECN_NAMES = {0: "Not-ECT", 1: "ECT(1)", 2: "ECT(0)", 3: "CE"}
SETTING_KEYS = ("trust", "pfc_priorities", "dscp_map", "tos", "ecn")


def _variable(name, interface=None):
    return f"roce_qos_interface_overrides.{interface}.{name}" if interface else f"roce_qos_{name}"


def tos_dscp(tos):
    """The DSCP a ToS byte carries (its six high bits)."""
    return int(tos) >> 2


def tos_ecn(tos):
    """The ECN codepoint of a ToS byte (its two low bits)."""
    return int(tos) & 3


def roce_interfaces(interfaces):
    """Names of the RoCE entries of ``fabric_interfaces`` (the normalised fabric model), in order."""
    return [
        normalise_interface(i)["name"]
        for i in interfaces or []
        if isinstance(i, dict) and i.get("kind") == "roce" and isinstance(i.get("name"), str)
    ]


def interface_settings(defaults, overrides, interfaces):
    """{interface: settings}: the role's settings for every RoCE interface, with that interface's overrides on top.

    ``defaults`` holds the keys of SETTING_KEYS (the role variables without their prefix); ``overrides`` maps an
    interface name to some of them. Values are returned as given: qos_errors judges them.
    """
    result = {}
    for name in roce_interfaces(interfaces):
        settings = {key: defaults.get(key) for key in SETTING_KEYS}
        settings.update((overrides or {}).get(name) or {})
        result[name] = settings
    return result


def _priority_errors(values, where):
    if not isinstance(values, list) or not values:
        return [f"{where}={values!r} must be a non-empty list of priorities 0-7, e.g. [3]"]
    return [
        f"{where}[{index}]={value!r} is not a priority: use 0-7 (RoCE's convention is 3)"
        for index, value in enumerate(values)
        if not is_int(value) or value not in PRIORITIES
    ]


def _dscp_map_errors(dscp_map, where):
    if not isinstance(dscp_map, dict) or not dscp_map:
        return [f"{where}={dscp_map!r} must map DSCP values to priorities, e.g. {{26: 3, 48: 6}}"]
    errors = []
    for dscp, priority in dscp_map.items():
        if not is_int(dscp) or not 0 <= dscp <= DSCP_MAX:
            errors.append(f"{where} key {dscp!r} is not a DSCP value: use 0-{DSCP_MAX} (RoCE data: 26, CNP: 48)")
        if not is_int(priority) or priority not in PRIORITIES:
            errors.append(f"{where}[{dscp!r}]={priority!r} is not a priority: use 0-7")
    return errors


def settings_errors(settings, interface=None):
    """Messages for one interface's settings, each naming the variable, the value and the fix."""
    errors = []
    if settings.get("trust") not in TRUST_MODES:
        errors.append(
            f"{_variable('trust', interface)}={settings.get('trust')!r} is not a trust mode: use dscp (RoCEv2 is "
            "routed: the DSCP survives where a VLAN priority does not) or pcp"
        )
    errors.extend(_priority_errors(settings.get("pfc_priorities"), _variable("pfc_priorities", interface)))
    errors.extend(_dscp_map_errors(settings.get("dscp_map"), _variable("dscp_map", interface)))
    tos = settings.get("tos")
    if not is_int(tos) or not 0 <= tos <= TOS_MAX:
        errors.append(
            f"{_variable('tos', interface)}={tos!r} is not a ToS byte: use 0-{TOS_MAX}, DSCP << 2 | ECN "
            "(106 = DSCP 26 with ECT(0))"
        )
    try:
        ecn = parse_bool(settings.get("ecn"))
    except (TypeError, ValueError):
        errors.append(f"{_variable('ecn', interface)}={settings.get('ecn')!r} must be true or false")
        ecn = None
    if errors:
        return errors
    # The settings are well-formed: now whether they contradict each other.
    dscp = tos_dscp(tos)
    pfc = set(settings["pfc_priorities"])
    if settings["trust"] == "dscp":
        if dscp not in settings["dscp_map"]:
            errors.append(
                f"{_variable('tos', interface)}={tos} marks DSCP {dscp}, which {_variable('dscp_map', interface)} "
                f"does not map to a priority: add {dscp}: <a priority in {sorted(pfc)}> or use a ToS of "
                f"{sorted(settings['dscp_map'])[0] << 2 | 2} for DSCP {sorted(settings['dscp_map'])[0]}"
            )
        elif settings["dscp_map"][dscp] not in pfc:
            errors.append(
                f"{_variable('tos', interface)}={tos} marks DSCP {dscp}, which maps to priority "
                f"{settings['dscp_map'][dscp]}, not one of {_variable('pfc_priorities', interface)} {sorted(pfc)}: "
                "RoCE traffic would be lossy; map the DSCP to a PFC priority or enable PFC on it"
            )
    if ecn and tos_ecn(tos) == 0:
        errors.append(
            f"{_variable('tos', interface)}={tos} is Not-ECT while {_variable('ecn', interface)} is true: switches "
            f"cannot mark congestion on it; use {tos | 2} (ECT(0))"
        )
    return errors


def nccl_errors(settings_by_interface, nccl_conf):
    """Messages for an /etc/nccl.conf (role nccl's ``nccl_conf``; None when role nccl does not manage it) that
    contradicts the QoS of the RoCE interfaces.

    NCCL opens its RoCE connections through verbs, not RDMA-CM, so RDMA-CM's default ToS does not reach them: their
    traffic class is NCCL_IB_TC, 0 when unset (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html).
    A host that trusts DSCP must therefore set NCCL_IB_TC to the ToS, or NCCL's traffic rides DSCP 0, which no PFC
    priority carries."""
    if nccl_conf is None:
        return []
    errors = []
    for name, settings in settings_by_interface.items():
        tc = nccl_conf.get("NCCL_IB_TC")
        if tc in (None, "") and settings.get("trust") == "dscp":
            errors.append(
                f"nccl_conf sets no NCCL_IB_TC while {name} trusts DSCP with ToS {settings.get('tos')} "
                f"({_variable('tos')}): NCCL connects through verbs, not RDMA-CM, so its traffic would leave with "
                f"traffic class 0 (DSCP 0, no PFC priority); add NCCL_IB_TC: {settings.get('tos')} to nccl_conf"
            )
        elif tc not in (None, "") and str(tc) != str(settings.get("tos")):
            errors.append(
                f"nccl_conf.NCCL_IB_TC={tc!r} contradicts the ToS {settings.get('tos')} of {name} "
                f"({_variable('tos')}): NCCL's traffic would carry another DSCP than RDMA-CM's; set NCCL_IB_TC to "
                f"{settings.get('tos')}"
            )
        sl = nccl_conf.get("NCCL_IB_SL")
        if (
            settings.get("trust") == "pcp"
            and sl not in (None, "")
            and _as_int(sl) not in (settings.get("pfc_priorities") or [])
        ):
            errors.append(
                f"nccl_conf.NCCL_IB_SL={sl!r} is not a PFC priority of {name} ({sorted(settings['pfc_priorities'])}) "
                "while it trusts pcp: NCCL's traffic would be lossy"
            )
    return errors


def _as_int(value):
    try:
        return int(str(value), 0)
    except ValueError:
        return None


def qos_errors(host, defaults, overrides, interfaces, nccl_conf=None):
    """Every problem of one host's QoS input, each prefixed with the host; empty when all is well. ``nccl_conf``:
    role nccl's mapping where that role writes /etc/nccl.conf on the host, None where it does not."""
    errors = []
    names = set(roce_interfaces(interfaces))
    for name in sorted(set(overrides or {}) - names):
        errors.append(
            f"roce_qos_interface_overrides names {name!r}, which is not a RoCE interface of fabric_interfaces "
            f"({', '.join(sorted(names)) or 'none'}): fix the name or remove the entry"
        )
    for name, override in (overrides or {}).items():
        unknown = sorted(set(override or {}) - set(SETTING_KEYS)) if isinstance(override, dict) else ["(not a map)"]
        if unknown:
            errors.append(
                f"roce_qos_interface_overrides.{name} has unknown keys {unknown}; known: {', '.join(SETTING_KEYS)}"
            )
    settings = interface_settings(
        defaults, {k: v for k, v in (overrides or {}).items() if isinstance(v, dict)}, interfaces
    )
    seen = set()
    for name, values in settings.items():
        interface = name if name in (overrides or {}) else None
        for message in settings_errors(values, interface):
            if message not in seen:  # the role-wide settings' problems once, not once per interface
                seen.add(message)
                errors.append(message)
    if not errors:
        errors.extend(nccl_errors(settings, nccl_conf))
    return [f"{host}: {message}" for message in errors]


def resolved_settings(defaults, overrides, interfaces):
    """{interface: settings} as roce_qos_apply takes them: validated input (qos_errors empty) with ``ecn`` a bool
    and the DSCP map's keys and values integers."""
    result = {}
    for name, settings in interface_settings(defaults, overrides, interfaces).items():
        result[name] = {
            "trust": settings["trust"],
            "pfc_priorities": sorted({int(p) for p in settings["pfc_priorities"]}),
            "dscp_map": {int(dscp): int(prio) for dscp, prio in settings["dscp_map"].items()},
            "tos": int(settings["tos"]),
            "ecn": parse_bool(settings["ecn"]),
        }
    return result


# --- at boot and after a driver reload ------------------------------------------------------------------------------
# The boot-time unit runs the very code module roce_qos runs (roce_qos_apply.py, through the entry point
# roce_qos_boot.py beside it, both written from the module's own module_utils) on the settings the module applied: a
# reboot or a driver reload must not return the host to lossy defaults.

# The boot code's package in the node's one library (module_utils/node_library.py): roce_qos_boot.py, the entry
# point, and roce_qos_apply.py beside it.
PACKAGE = "gpucluster_fabric_roce_qos"
BOOT_SCRIPT = f"{LIBRARY}/{PACKAGE}/roce_qos_boot.py"
CONFIG = "/etc/gpucluster/roce_qos.json"
UNIT = "gpucluster-roce-qos.service"
UNIT_FILE = "/etc/systemd/system/" + UNIT
UDEV_RULE = "/etc/udev/rules.d/90-gpucluster-roce-qos.rules"


def _text(header, lines):
    return (header.rstrip("\n") + "\n" if header else "") + "".join(line + "\n" for line in lines)


def boot_config(interfaces):
    """The settings file the unit applies: {"interfaces": {name: settings}}, keys sorted, as JSON."""
    return json.dumps({"interfaces": interfaces}, indent=4, sort_keys=True) + "\n"


def boot_unit(header, interfaces, wait_seconds):
    """The oneshot unit (systemd.service(5)) that applies the settings at boot, after modules load and configfs."""
    return _text(
        header,
        [
            "[Unit]",
            f"Description=RoCE lossless QoS (PFC, DSCP map, ECN, RDMA-CM default ToS) on {', '.join(interfaces)}",
            f"Documentation=file://{CONFIG}",
            "Wants=sys-kernel-config.mount",
            "After=sys-kernel-config.mount systemd-modules-load.service network.target",
            "",
            "[Service]",
            "Type=oneshot",
            "RemainAfterExit=yes",
            f"ExecStart=/usr/bin/python3 {BOOT_SCRIPT} {CONFIG} {int(wait_seconds)}",
            f"TimeoutStartSec={int(wait_seconds) + 60}",
            "",
            "[Install]",
            "WantedBy=multi-user.target",
        ],
    )


def udev_rule(header):
    """A new RDMA device (a driver reload, a Soft-RoCE device created late) gets the settings again (udev(7))."""
    return _text(
        header,
        [
            "# A new RDMA device (a driver reload, a Soft-RoCE device created late) gets the RoCE QoS again.",
            f'ACTION=="add", SUBSYSTEM=="infiniband", RUN+="/bin/systemctl --no-block restart {UNIT}"',
        ],
    )


# The settings of role roce_qos' input (``__roce_qos_input``) that are site-wide defaults per interface.
INPUT_KEYS = ("trust", "pfc_priorities", "dscp_map", "tos", "ecn")


def _input_defaults(data):
    return {key: data.get(key) for key in INPUT_KEYS}


def input_settings(data):
    """{interface: settings} for every RoCE interface of role roce_qos' input, as module roce_qos and the boot-time
    unit take them."""
    return resolved_settings(_input_defaults(data), data.get("interface_overrides") or {}, data.get("interfaces") or [])


def input_errors(data):
    """Every problem of role roce_qos' input (``__roce_qos_input``: host, interfaces, the settings, their
    interface_overrides, nccl_conf), each naming the host, the variable and the fix."""
    return qos_errors(
        data.get("host"),
        _input_defaults(data),
        data.get("interface_overrides") or {},
        data.get("interfaces") or [],
        data.get("nccl_conf"),
    )
