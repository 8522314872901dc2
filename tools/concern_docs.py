#!/usr/bin/env python3
"""Generate docs/architecture.md's table of concerns from the registry (plugins/module_utils/concerns.py).

    tools/concern_docs.py           rewrite the generated table
    tools/concern_docs.py --check   exit 1 when the table is stale

The table lies between BEGIN/END markers; the text outside them is left as written.
"""

import argparse
import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "architecture.md"
BEGIN = (
    "<!-- BEGIN GENERATED CONCERNS: tools/concern_docs.py writes this table from plugins/module_utils/concerns.py -->"
)
END = "<!-- END GENERATED CONCERNS -->"
HOSTS = {"gpu": "GPU nodes", "sm": "subnet managers", "every": "both"}


def registry():
    """The registry, imported as the collection's module (it imports its concerns' code): through the collections
    root `make venv` links this checkout into."""
    sys.path.insert(0, str(ROOT / ".build" / "collections"))
    return importlib.import_module("ansible_collections.gpucluster.fabric.plugins.module_utils.concerns")


def _sources(concern):
    """What the arguments are made from: the role's variables, derived values, constants."""
    variables, derived = 0, []
    for source in concern.args.values():
        for item in source if isinstance(source, list) else [source]:
            if isinstance(item, str) and item.startswith("@"):
                derived.append(item[1:].split(":", 1)[0] if item.startswith("@template:") else item[1:])
            elif isinstance(item, str):
                variables += 1
    parts = [f"{variables} variables"] if variables else []
    if derived:
        parts.append("derived: " + ", ".join(f"`{name}`" for name in dict.fromkeys(derived)))
    return "; ".join(parts) or "-"


def table(module):
    lines = [
        "| concern (role) | hosts | applier module | its code (`plugins/module_utils/`) | arguments made from | "
        "left out of the intent | the intent's part beside them (typed) | tags | drift checked | "
        "in a call of several |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in module.CONCERNS:
        code = f"`{c.code}.py`" if c.code else "-"
        applier = f"`{c.module}`" if c.module else "- (measures)"
        left = ", ".join(f"`{name}`" for name in c.leave_out) or "-"
        tags = ", ".join(f"`{tag}`" for tag in c.tags) or "-"
        part = ", ".join(f"`{key}` ({option['type']})" for key, (_source, option) in c.part.items()) or "-"
        lines.append(
            f"| `{c.role}` | {HOSTS[c.hosts]} | {applier} | {code} | {_sources(c) if c.module else '-'} | {left} | "
            f"{part} | {tags} | {'yes' if c.drift else 'no'} | {'yes' if c.in_apply else 'no'} |"
        )
    return "\n".join(lines)


def render(text, generated):
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{PAGE}: no {BEGIN!r} ... {END!r} section")
    head, rest = text.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{generated}\n{END}{tail}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 when the table is stale")
    args = parser.parse_args()
    text = PAGE.read_text()
    new = render(text, table(registry()))
    if args.check:
        if new != text:
            print(f"{PAGE.relative_to(ROOT)}: the table of concerns is stale; run tools/concern_docs.py")
            return 1
        return 0
    PAGE.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
