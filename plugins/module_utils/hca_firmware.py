# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Role hca_firmware's rules: the firmware settings of NVIDIA (Mellanox) adapters, read and set with mstflint's
``mstconfig`` (Debian's package mstflint), compared with what the site names, current and next boot.

``mstconfig -e -d <PCI address> query NAME...`` prints, per parameter, its default, current and next-boot values
(mstflint's mlxconfig/mlxcfg_ui.cpp, MlxCfg::printSingleParam): a value with a textual name as ``True(1)`` or
``ETH(2)``, a plain number as ``16``, an unknown one as ``N/A``; a line starts with ``*`` when the next-boot value
differs from the default or current one. A setting written with ``mstconfig -y -d <address> set NAME=VALUE`` takes
effect at the next boot (or firmware reset): until then the current value stays the old one.

Standard library only (Python 3.8 targets): the module hca_firmware and the node check run it on the node.
"""

import os
import re

from . import pcie
from .applier import ARGUMENT_SPEC as APPLIER_ARGUMENTS
from .applier import Applier

COLUMNS = {"Default": "default", "Current": "current", "Next Boot": "next"}
_VALUE = re.compile(r"^(?P<text>.*)\((?P<number>\d+)\)$")
_PARAM_LINE = re.compile(r"^(?P<star>[* ])\s+(?P<name>[A-Za-z0-9_\[\].]+)\s+(?P<values>\S.*)$")
_NAME = re.compile(r"^[A-Z0-9_]+(\[\d+(\.\.\d+)?\])?$")
_PCI_ADDRESS = re.compile(r"^([0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")

ARGUMENT_SPEC = dict(
    APPLIER_ARGUMENTS,
    settings={"type": "dict", "default": {}},
    devices={"type": "list", "elements": "str", "default": []},
    apply={"type": "bool", "default": False},
    mstconfig={"type": "str", "default": "mstconfig"},
)


def parse_value(token):
    """``{"text", "number"}`` of one value column: ``True(1)`` -> text True, number 1; ``16`` -> number 16; ``N/A``
    -> None (the firmware does not say)."""
    if token in ("N/A", ""):
        return None
    match = _VALUE.match(token)
    if match:
        return {"text": match.group("text"), "number": int(match.group("number"))}
    if token.isdigit():
        return {"text": None, "number": int(token)}
    return {"text": token, "number": None}


def show(value):
    """A parsed value as mstconfig prints it."""
    if value is None:
        return "N/A"
    if value["text"] is not None and value["number"] is not None:
        return f"{value['text']}({value['number']})"
    return str(value["number"] if value["text"] is None else value["text"])


def parse_query(text):
    """What ``mstconfig -e -d <address> query`` printed: {device_type, columns, params: {NAME: {default, current,
    next}}, errors}. The columns are those of its header (without -e, or where the firmware cannot tell the default
    or current values, only ``next``)."""
    result = {"device_type": None, "columns": [], "params": {}, "errors": []}
    for line in text.splitlines():
        if line.startswith("-E-"):
            result["errors"].append(line[3:].strip())
            continue
        if line.startswith("Device type:"):
            result["device_type"] = line.split(":", 1)[1].strip() or None
            continue
        if line.startswith("Configurations:"):
            header = line[len("Configurations:") :]
            result["columns"] = [
                key
                for _pos, key in sorted((header.find(title), key) for title, key in COLUMNS.items() if title in header)
            ]
            continue
        if not result["columns"]:
            continue
        match = _PARAM_LINE.match(line)
        if not match:
            continue
        values = match.group("values").split()
        if len(values) != len(result["columns"]):
            continue
        result["params"][match.group("name")] = {
            column: parse_value(token) for column, token in zip(result["columns"], values)
        }
    return result


def wanted_value(value):
    """A site's value as {"text", "number"}: a boolean is the number 1 or 0 (mstconfig's True(1) and False(0)), an
    integer or a string of digits a number, any other string a textual name (ETH, per_mkey)."""
    if isinstance(value, bool):
        return {"text": None, "number": int(value)}
    if isinstance(value, int):
        return {"text": None, "number": value}
    text = str(value).strip()
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", text):
        return {"text": None, "number": int(text, 16)}
    if re.fullmatch(r"\d+", text):  # decimal, leading zeros too ("08"), as mstconfig reads it
        return {"text": None, "number": int(text, 10)}
    return {"text": text, "number": None}


def matches(wanted, found):
    """Whether the firmware's value ``found`` is the site's ``wanted`` (both parsed): by number where the site gave
    one, else by textual name, case aside (mstconfig accepts either)."""
    if found is None:
        return False
    if wanted["number"] is not None:
        return found["number"] == wanted["number"]
    return (found["text"] or "").casefold() == wanted["text"].casefold()


def set_argument(name, value):
    """``NAME=VALUE`` for ``mstconfig set``."""
    wanted = wanted_value(value)
    return f"{name}={wanted['number'] if wanted['number'] is not None else wanted['text']}"


def compare(settings, params):
    """{name: {wanted, current, next, next_ok, current_ok}} for each setting of the site, from one device's parsed
    params; a setting the firmware does not report has current and next None."""
    compared = {}
    for name, value in settings.items():
        found = params.get(name) or {}
        wanted = wanted_value(value)
        current, upcoming = found.get("current"), found.get("next")
        compared[name] = {
            "wanted": value if isinstance(value, (bool, int)) else str(value),
            "current": show(current) if "current" in found else None,
            "next": show(upcoming) if upcoming is not None or "next" in found else None,
            "reported": name in params,
            "next_ok": matches(wanted, upcoming),
            # Where the firmware cannot tell the current value (no Current column), the next boot's stands for it.
            "current_ok": matches(wanted, current) if "current" in found else matches(wanted, upcoming),
        }
    return compared


def setting_errors(settings, catalogue=None):
    """What is wrong with ``settings`` (hca_firmware_settings): each key a parameter name as mstconfig spells it and
    each value a boolean, an integer or a textual name. ``catalogue`` ({name: {type, values}}, from mstflint's
    parameter database) also refuses names it does not know and values that are none of an enumeration's."""
    if not isinstance(settings, dict):
        return [f"hca_firmware_settings must be a mapping of mstconfig parameter to value, not {settings!r}"]
    errors = []
    for name, value in settings.items():
        if not isinstance(name, str) or not _NAME.match(name):
            errors.append(
                f"hca_firmware_settings: {name!r} is not an mstconfig parameter name (capitals, digits and _, e.g."
                " ATS_ENABLED or LINK_TYPE_P1)"
            )
            continue
        if isinstance(value, (dict, list, tuple)) or value is None or str(value).strip() == "":
            errors.append(f"hca_firmware_settings.{name}: {value!r} is not a value; give a boolean, number or name")
            continue
        if catalogue is None:
            continue
        known = catalogue_entry(catalogue, name)
        whole = catalogue.get(re.sub(r"\[\d+(\.\.\d+)?\]$", "", name)) or {}
        if known is None and whole.get("per"):
            suffix = "_P1" if whole["per"] == "port" else "_M0"
            errors.append(f"hca_firmware_settings: {name} is set per {whole['per']}: name it {name}{suffix}, ...")
            continue
        if known is None:
            errors.append(
                f"hca_firmware_settings: {name} is not a parameter mstconfig knows (mstflint's parameter database);"
                " check its spelling with `mstconfig -d <PCI address> query` on the host"
            )
            continue
        wanted = wanted_value(value)
        values = known.get("values") or {}
        if values and wanted["text"] is not None and wanted["text"].casefold() not in {v.casefold() for v in values}:
            errors.append(
                f"hca_firmware_settings.{name}: {value!r} is not one of its values {', '.join(sorted(values))}"
            )
        if known.get("type") == "BOOL" and not (
            wanted["number"] in (0, 1) or (wanted["text"] or "").casefold() in ("true", "false")
        ):
            errors.append(f"hca_firmware_settings.{name}: {value!r} is not a boolean (true or false)")
    return errors


def catalogue_entry(catalogue, name):
    """The database entry of parameter ``name``: a per-port parameter is named with its port (LINK_TYPE_P1), a
    per-module one with its module (_M0), an array element with its index (NAME[3])."""
    base = re.sub(r"\[\d+(\.\.\d+)?\]$", "", name)
    if base in catalogue:
        return None if catalogue[base].get("per") else catalogue[base]
    match = re.fullmatch(r"(?P<base>.+)_(?P<kind>[PM])\d+", base)
    if match and match.group("base") in catalogue:
        entry = catalogue[match.group("base")]
        if entry.get("per") == {"P": "port", "M": "module"}[match.group("kind")]:
            return entry
    return None


def adapters(root="/"):
    """The PCI addresses mstconfig configures: every physical function 0 of an NVIDIA (Mellanox) network device
    (pcie.nvidia_network_functions), sorted. A dual-port adapter's ports share one configuration (their parameters
    carry _P1 and _P2); virtual functions have none of their own."""
    return [
        d["address"] for d in pcie.nvidia_network_functions(root) if d["address"].endswith(".0") and not d["physfn"]
    ]


def read_device(module, mstconfig, device, names):
    """(parsed query, error) of one device for ``names``."""
    rc, out, err = module.run_command([mstconfig, "-e", "-d", device, "query", *names])
    parsed = parse_query(out)
    if rc != 0 or not parsed["columns"]:
        said = " ".join((" ".join(parsed["errors"]) or err or out).split())[:300] or f"rc {rc}"
        return parsed, f"mstconfig -d {device} query failed: {said}"
    return parsed, None


def device_errors(devices):
    """What is wrong with hca_firmware_devices: each a PCI address."""
    if not isinstance(devices, (list, tuple)):
        return [f"hca_firmware_devices must be a list of PCI addresses, not {devices!r}"]
    return [
        f"hca_firmware_devices: {device!r} is not a PCI address (0000:17:00.0 or 17:00.0); leave the list empty to"
        " configure every NVIDIA adapter found"
        for device in devices
        if not _PCI_ADDRESS.match(str(device))
    ]


def input_errors(params):
    return setting_errors(params["settings"]) + device_errors(params["devices"])


def nothing_to_apply(args):
    """The result when the site names no firmware setting (the module is then not run), else None."""
    if args.get("settings"):
        return None
    return {"changed": False, "msg": "no firmware setting is named: nothing to read", "reboot_required": False}


def run(module):
    """Module hca_firmware on ``module`` (an AnsibleModule, or a stand-in): exits through it.

    Reads every adapter's settings; where ``apply`` is on, sets those whose next-boot value differs (in check mode:
    says so). ``reboot_required``: a setting's current value is not the wanted one while its next-boot value is."""
    params = module.params
    applier = Applier(module)
    applier.refuse(input_errors(params))
    settings = params["settings"]
    result = {"changed": False, "changes": [], "devices": {}, "differences": [], "reboot_required": False}
    if not settings:
        module.exit_json(msg="no firmware setting is named: nothing to read", **result)
    host = params["host"]
    prefix = f"{host}: " if host else ""
    name = params["mstconfig"]
    mstconfig = name if os.path.isabs(name) else module.get_bin_path(name)
    if not mstconfig or not os.path.exists(mstconfig):
        if params["state"] == "checked":  # the preflight, before role rdma_core installed mstflint
            module.exit_json(msg="mstconfig is not installed yet: the settings are read when it is", **result)
        module.fail_json(
            msg=f"{prefix}hca_firmware_settings names settings, but {name} is not installed: install Debian's"
            " mstflint (role rdma_core installs it when hca_firmware_settings is set)",
            **result,
        )
    devices = list(params["devices"]) or adapters(params["root"])
    if not devices:
        module.fail_json(
            msg=f"{prefix}hca_firmware_settings names settings, but the host has no NVIDIA network adapter on its PCI"
            " bus (vendor 0x15b3): unset hca_firmware_settings for this host, or name its adapters in"
            " hca_firmware_devices",
            **result,
        )
    problems = []
    for device in devices:
        parsed, error = read_device(module, mstconfig, device, list(settings))
        if error:
            problems.append(prefix + error)
            continue
        compared = compare(settings, parsed["params"])
        result["devices"][device] = {"device_type": parsed["device_type"], "settings": compared}
        unknown = [name for name, item in compared.items() if not item["reported"]]
        if unknown:
            problems.append(
                f"{prefix}{device} ({parsed['device_type'] or 'unknown type'}): its firmware does not report"
                f" {', '.join(unknown)}: remove them from hca_firmware_settings for this host, or update the firmware"
            )
            continue
        pending = {name: item for name, item in compared.items() if not item["next_ok"]}
        if pending and params["apply"] and params["state"] == "present":
            arguments = [set_argument(name, settings[name]) for name in pending]
            for name, item in pending.items():
                applier.changes.append(
                    {"what": f"{device} {name}", "why": f"next boot {item['next']}, wanted {item['wanted']}"}
                )
            if not module.check_mode:
                rc, out, err = module.run_command([mstconfig, "-y", "-d", device, "set", *arguments])
                if rc != 0:
                    said = " ".join((err or out).split())[:300] or f"rc {rc}"
                    problems.append(f"{prefix}mstconfig -d {device} set {' '.join(arguments)} failed: {said}")
                    continue
                for item in pending.values():
                    item.update(next_ok=True, next=show(wanted_value(item["wanted"])))
            # Set (or, in check mode, to be set): loaded at the next boot.
            result["reboot_required"] |= any(not item["current_ok"] for item in pending.values())
        for name, item in compared.items():
            if not (item["next_ok"] and item["current_ok"]):
                result["differences"].append(
                    f"{device} {name}: current {item['current']}, next boot {item['next']}, wanted {item['wanted']}"
                )
            if item["next_ok"] and not item["current_ok"]:
                result["reboot_required"] = True
    # The fact the play reads (and a play of the site's own may): the firmware waits for a reboot to load a setting.
    result["ansible_facts"] = {"gpucluster_hca_firmware_reboot_required": result["reboot_required"]}
    if problems:
        module.fail_json(msg="\n".join(problems), **applier.report(result))
    module.exit_json(**applier.report(result))
