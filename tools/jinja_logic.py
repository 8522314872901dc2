#!/usr/bin/env python3
"""Find Jinja logic in YAML longer than a limit (default 200 characters).

Logic belongs in Python (filters, modules, action plugins) with unit tests; YAML orchestrates. A YAML string of
roles/ or playbooks/ is measured by the Jinja it holds: the text inside its `{{ }}` and `{% %}` delimiters (a bare
conditional - when, that, failed_when, changed_when, until - counts whole), runs of whitespace counted as one
character. Prose around short interpolations (a fail_msg naming a few variables) is not logic and is not counted.
Templates (.j2 files) are not measured: they are the output's shape.

Usage: tools/jinja_logic.py [ROOT] [--limit N] - prints `file:line: N characters: snippet` for each string over
the limit, longest first; exit status 1 if any.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("bool_uses", Path(__file__).with_name("bool_uses.py"))
bool_uses = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bool_uses
_spec.loader.exec_module(bool_uses)

LIMIT = 200
_DELIMITED = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)
_SPACE = re.compile(r"\s+")


def logic_length(expression):
    """Characters of Jinja in one YAML string (whitespace runs count as one)."""
    text = expression.text
    parts = [text] if expression.conditional and not bool_uses._is_template(text) else _DELIMITED.findall(text)
    return sum(len(_SPACE.sub(" ", part.strip())) for part in parts)


def long_logic(root, limit=LIMIT):
    found = []
    for expression in bool_uses.expressions(root):
        if expression.style == "j2":
            continue
        length = logic_length(expression)
        if length > limit:
            found.append((length, expression))
    return sorted(found, key=lambda item: (-item[0], str(item[1].path), item[1].line))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=Path(__file__).resolve().parents[1])
    parser.add_argument("--limit", type=int, default=LIMIT)
    args = parser.parse_args(argv)
    found = long_logic(args.root, args.limit)
    for length, expression in found:
        snippet = _SPACE.sub(" ", expression.text.strip())[:100]
        print(f"{expression.path}:{expression.line}: {length} characters: {snippet}")
    if found:
        print(f"{len(found)} Jinja strings over {args.limit} characters: move the logic into Python", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
