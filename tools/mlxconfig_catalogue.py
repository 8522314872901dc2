#!/usr/bin/env python3
"""Write plugins/plugin_utils/mlxconfig_params.py, the catalogue of the parameters mstconfig knows, from mstflint's
own parameter database (Debian's package mstflint installs it as
/usr/share/mstflint/mlxconfig_dbs/mlxconfig_host.db; upstream: Mellanox/mstflint, mlxconfig/mlxconfig_dbs).

    tools/mlxconfig_catalogue.py           rewrite the catalogue from the installed database
    tools/mlxconfig_catalogue.py --check   exit 1 when the catalogue differs from the installed database

The preflight refuses a name of hca_firmware_settings the catalogue does not hold, and a value that is none of an
enumeration's names, on the controller and before any host changes: the controller needs no mstflint for it.
A parameter of a per-port TLV (class 1) is named with its port (LINK_TYPE_P1), of a per-module one (class 9) with
its module (_M0), as mstflint's mlxconfig/mlxcfg_tlv.cpp names them.
"""

import argparse
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATABASE = Path("/usr/share/mstflint/mlxconfig_dbs/mlxconfig_host.db")
TARGET = ROOT / "plugins" / "plugin_utils" / "mlxconfig_params.py"
PER = {1: "port", 9: "module"}


def mstflint_version():
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "mstflint"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or "unknown"


def catalogue(database):
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    rows = connection.execute(
        "SELECT p.mlxconfig_name, p.type, p.textual_values, t.class FROM params p JOIN tlvs t ON p.tlv_name = t.name"
        " WHERE p.mlxconfig_name IS NOT NULL AND p.mlxconfig_name != ''"
    ).fetchall()
    entries = {}
    for name, kind, textual, tlv_class in rows:
        values = tuple(sorted(part.split("=", 1)[0].strip() for part in (textual or "").split(",") if part.strip()))
        entries[name] = (kind, values, PER.get(tlv_class, ""))
    return entries


def render(entries, version):
    lines = [
        "# Copyright: gpucluster.fabric contributors",
        "# Apache License 2.0 (see LICENSE)",
        '"""The parameters mstconfig knows, from mstflint\'s parameter database (mlxconfig_host.db of Debian\'s',
        f"mstflint {version}). Written by tools/mlxconfig_catalogue.py: do not edit.",
        "",
        "{name: {type, values (an enumeration's names), per (port: named NAME_P<n>; module: NAME_M<n>)}}",
        '"""',
        "",
        "# fmt: off",
        "CATALOGUE = {",
    ]
    for name in sorted(entries):
        kind, values, per = entries[name]
        line = f"    {name!r}: {{'type': {kind!r}, 'values': {values!r}, 'per': {per!r}}},"
        if len(line) > 120:  # an enumeration of many names: one name a line
            line = f"    {name!r}: {{'type': {kind!r}, 'per': {per!r}, 'values': (\n"
            line += "".join(f"        {value!r},\n" for value in values) + "    )},"
        lines.append(line)
    lines += ["}", "# fmt: on", ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--database", type=Path, default=DATABASE)
    args = parser.parse_args(argv)
    if not args.database.is_file():
        print(f"{args.database} is missing: install Debian's mstflint (tests/lab/setup-host.sh does)", file=sys.stderr)
        return 1
    text = render(catalogue(args.database), mstflint_version())
    if args.check:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET} differs from {args.database}: run tools/mlxconfig_catalogue.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
