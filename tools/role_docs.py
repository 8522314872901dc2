#!/usr/bin/env python3
"""Generate the "Variables" section of each role's README.md from its meta/argument_specs.yml.

    tools/role_docs.py           rewrite the generated section of every roles/*/README.md
    tools/role_docs.py --check   exit 1 when a README's section is stale or a role's argument specs and
                                 defaults disagree (names, or default values)

The section lies between BEGIN/END markers; text outside them is left as written.
"""

import argparse
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "<!-- BEGIN GENERATED VARIABLES: tools/role_docs.py writes this section from meta/argument_specs.yml -->"
END = "<!-- END GENERATED VARIABLES -->"


def load(path):
    if not path.exists():
        return {}
    with open(path, encoding="utf-8") as stream:
        return yaml.safe_load(stream) or {}


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def render_default(spec):
    if "default" not in spec:
        return "*required*" if spec.get("required") else ""
    return "`" + cell(json.dumps(spec["default"])) + "`"


def render_type(spec):
    kind = spec.get("type", "str")
    if kind == "list" and "elements" in spec:
        kind = f"list of {spec['elements']}"
    if "choices" in spec:
        kind += " (" + ", ".join(f"`{choice}`" for choice in spec["choices"]) + ")"
    return kind


def render_description(spec):
    description = spec.get("description", "")
    if isinstance(description, list):
        description = " ".join(description)
    suboptions = spec.get("options")
    if suboptions:
        items = ", ".join(f"`{name}` ({render_type(sub)})" for name, sub in suboptions.items())
        description += f" Keys: {items}."
    return cell(description)


def render(role, specs):
    lines = [BEGIN, "", "## Variables", ""]
    for entry, spec in specs.items():
        if len(specs) > 1:
            lines += [f"### Entry point `{entry}`", ""]
        lines += [cell(spec.get("short_description", "")), ""]
        options = spec.get("options") or {}
        if not options:
            lines += ["This entry point takes no variables.", ""]
            continue
        lines += ["| variable | type | default | description |", "|---|---|---|---|"]
        for name, option in options.items():
            lines.append(
                f"| `{name}` | {render_type(option)} | {render_default(option)} | {render_description(option)} |"
            )
        lines.append("")
    lines.append(END)
    return "\n".join(lines)


def replace_section(text, section):
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        return head + section + tail
    return text.rstrip("\n") + "\n\n" + section + "\n"


def disagreements(role):
    defaults = load(role / "defaults" / "main.yml")
    specs = load(role / "meta" / "argument_specs.yml").get("argument_specs", {})
    options = (specs.get("main") or {}).get("options") or {}
    problems = []
    for name in sorted(set(defaults) - set(options)):
        problems.append(f"{role.name}: {name} is in defaults/main.yml but not in meta/argument_specs.yml")
    for name, option in options.items():
        if name in defaults and option.get("default") != defaults[name]:
            problems.append(
                f"{role.name}: {name} defaults to {defaults[name]!r} but argument_specs says {option.get('default')!r}"
            )
        if name not in defaults and "default" in option:
            problems.append(f"{role.name}: {name} has a default in argument_specs but none in defaults/main.yml")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="report stale docs and spec/default drift, change nothing")
    args = parser.parse_args()
    problems = []
    for spec_file in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        role = spec_file.parent.parent
        problems += disagreements(role)
        readme = role / "README.md"
        current = readme.read_text(encoding="utf-8") if readme.exists() else f"# gpucluster.fabric.{role.name}\n"
        wanted = replace_section(current, render(role, load(spec_file)["argument_specs"]))
        if wanted != current:
            if args.check:
                problems.append(f"{readme.relative_to(ROOT)} is stale: run tools/role_docs.py")
            else:
                readme.write_text(wanted, encoding="utf-8")
                print(f"wrote {readme.relative_to(ROOT)}")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
