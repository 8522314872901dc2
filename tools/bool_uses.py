#!/usr/bin/env python3
"""Find every use of a boolean switch that is not under the `bool` filter.

An extra var (`-e nccl_hold=false`) and every AWX survey answer is a string. ansible-core 2.19 refuses a conditional
whose result comes from a string ("Conditional result (True) was derived from value of type 'str'"), and elsewhere
the string "false" is simply truthy: `when: not x`, `'a' if x else 'b'` and a template's `{% if x %}` all take
"false" for true. Role argument-spec validation checks the value but does not convert it for later use. So every
reference to a boolean variable must be the input of `| bool` (`x | bool`, `x | default(false) | bool`), or a test
that does not look at its truth (`x is none`, `x is defined`).

Boolean variables: options of `type: bool` in roles/*/meta/argument_specs.yml, boolean values in roles' defaults,
in plays' `vars:` and in inventories/*/group_vars and host_vars. Boolean suboptions (opensm_partitions[].ipoib) are
checked where an expression reads them as an attribute (`p.ipoib`, `p['ipoib']`).

Expressions: in roles/, playbooks/ and templates/, every conditional (when, that, failed_when, changed_when, until:
a bare expression) and every string holding `{{`/`{%`, and every .j2 template; parsed with jinja2's parser.

Usage: tools/bool_uses.py [ROOT] — prints `file:line: variable: snippet` for each bare use; exit status 1 if any.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import warnings
from pathlib import Path

import jinja2
import yaml
from jinja2 import nodes

CONDITIONAL_KEYS = frozenset(("when", "that", "failed_when", "changed_when", "until"))
BOOL_FILTERS = frozenset(("bool", "ansible.builtin.bool"))
# Filters a switch may pass through on its way into `bool` (`x | default(false) | bool`).
PASS_THROUGH_FILTERS = frozenset(("default", "d", "ansible.builtin.default"))
# Tests that do not look at the value's truth.
NEUTRAL_TESTS = frozenset(("none", "defined", "undefined", "ansible.builtin.defined", "ansible.builtin.undefined"))
TEMPLATE_MARKERS = ("{{", "{%", "{#")
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")

ENV = jinja2.Environment(extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])


@dataclasses.dataclass(frozen=True)
class Expression:
    """One Jinja expression or template: where it stands, its text, and whether it is a bare conditional."""

    path: Path
    line: int  # 1-based line of the expression's first character
    end_line: int
    text: str
    conditional: bool
    style: str = ""  # YAML scalar style ('|', '>', quotes, '' for plain); 'j2' for a template file

    def source(self):
        return self.text if not self.conditional or _is_template(self.text) else "{{ " + self.text + " }}"

    def parse(self):
        with warnings.catch_warnings():
            # jinja2's lexer warns about regex escapes ('\s') in string literals; not this check's concern.
            warnings.simplefilter("ignore", DeprecationWarning)
            return ENV.parse(self.source())


@dataclasses.dataclass(frozen=True)
class BareUse:
    path: Path
    line: int
    name: str
    text: str

    def __str__(self):
        snippet = " ".join(self.text.split())
        snippet = snippet if len(snippet) <= 100 else snippet[:97] + "..."
        return f"{self.path}:{self.line}: {self.name}: {snippet}"


def _is_template(text):
    return any(marker in text for marker in TEMPLATE_MARKERS)


# --- boolean variables ------------------------------------------------------------------------------------------


def _compose(path):
    """The YAML node tree of a file (composition only: Ansible tags such as !vault need no constructor)."""
    try:
        return yaml.compose(path.read_text(), Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None


def _bool_keys(node):
    """Top-level keys of a YAML mapping node whose value is a YAML boolean."""
    if not isinstance(node, yaml.MappingNode):
        return set()
    return {
        key.value
        for key, value in node.value
        if isinstance(key, yaml.ScalarNode)
        and isinstance(value, yaml.ScalarNode)
        and value.tag == "tag:yaml.org,2002:bool"
    }


def _spec_bools(options, names, attrs):
    """Boolean options into names (top level) and boolean suboptions, at any depth, into attrs."""
    for name, option in (options or {}).items():
        if not isinstance(option, dict):
            continue
        if option.get("type") == "bool":
            names.add(name)
        _spec_bools(option.get("options"), attrs, attrs)


def boolean_variables(root):
    """(names, attributes): the boolean variables and the boolean suboption keys the collection declares or sets."""
    root = Path(root)
    names, attrs = set(), set()
    for spec_path in sorted(root.glob("roles/*/meta/argument_specs.yml")):
        specs = (yaml.safe_load(spec_path.read_text()) or {}).get("argument_specs") or {}
        for entry in specs.values():
            _spec_bools((entry or {}).get("options"), names, attrs)
    for path in sorted(root.glob("roles/*/defaults/main.yml")):
        names |= _bool_keys(_compose(path))
    for path in sorted(root.glob("playbooks/*.yml")):
        node = _compose(path)
        for play in node.value if isinstance(node, yaml.SequenceNode) else []:
            for key, value in play.value if isinstance(play, yaml.MappingNode) else []:
                if key.value == "vars":
                    names |= _bool_keys(value)
    for pattern in ("inventories/*/group_vars/**/*.yml", "inventories/*/host_vars/**/*.yml"):
        for path in sorted(root.glob(pattern)):
            names |= {name for name in _bool_keys(_compose(path)) if not name.startswith("ansible_")}
    return names, attrs


# --- expressions ------------------------------------------------------------------------------------------------


def _scalar_expression(path, node, conditional):
    first = node.start_mark.line + (1 if node.style in ("|", ">") else 0)
    return Expression(path, first + 1, node.end_mark.line + 1, node.value, conditional, node.style or "")


def _walk_yaml(path, node, key=None):
    if isinstance(node, yaml.MappingNode):
        for key_node, value in node.value:
            yield from _walk_yaml(path, value, key_node.value if isinstance(key_node, yaml.ScalarNode) else None)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _walk_yaml(path, item, key)
    elif isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:str":
        if key in CONDITIONAL_KEYS:
            yield _scalar_expression(path, node, conditional=True)
        elif _is_template(node.value):
            yield _scalar_expression(path, node, conditional=False)


def source_files(root):
    root = Path(root)
    files = set()
    for pattern in ("roles/**/*.yml", "roles/**/*.yaml", "playbooks/**/*.yml", "roles/**/*.j2", "templates/**/*.j2"):
        files |= set(root.glob(pattern))
    # A role's files/ are copied as they are, never templated (Prometheus rules hold {{ $labels }} of their own).
    return sorted(path for path in files if path.relative_to(root).parts[2:3] != ("files",))


def expressions(root):
    """Every Jinja expression of roles/, playbooks/ and templates/ (paths relative to root)."""
    root = Path(root)
    for path in source_files(root):
        relative = path.relative_to(root)
        if path.suffix == ".j2":
            text = path.read_text()
            yield Expression(relative, 1, text.count("\n") + 1, text, conditional=False, style="j2")
        else:
            yield from _walk_yaml(relative, yaml.compose(path.read_text(), Loader=yaml.SafeLoader))


# --- the check --------------------------------------------------------------------------------------------------


def _walk(node, parents=()):
    yield node, parents
    for child in node.iter_child_nodes():
        yield from _walk(child, (*parents, node))


def _under_bool(node, parents):
    """Whether node is the input of `| bool`, directly or through default(), or of a truth-neutral test."""
    for parent in reversed(parents):
        if isinstance(parent, nodes.Filter) and parent.node is node:
            if parent.name in BOOL_FILTERS:
                return True
            if parent.name in PASS_THROUGH_FILTERS:
                node = parent
                continue
            return False
        if isinstance(parent, nodes.Test) and parent.node is node:
            return parent.name in NEUTRAL_TESTS
        return False
    return False


def _switch_name(node, names, attrs):
    if isinstance(node, nodes.Name) and node.ctx == "load" and node.name in names:
        return node.name
    if isinstance(node, nodes.Getattr) and node.attr in attrs:
        return "." + node.attr
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) and node.arg.value in attrs:
        return "." + node.arg.value
    return None


def bare_uses_in_tree(tree, names, attrs=frozenset()):
    """[(name, jinja line)] for each reference to a boolean variable (or suboption) not under `| bool`."""
    found = []
    for node, parents in _walk(tree):
        name = _switch_name(node, names, attrs)
        if name and not _under_bool(node, parents):
            found.append((name, node.lineno))
    return found


def _line_of(root, expression, name, jinja_line):
    """The file line of a reference: exact in a template or a literal block, else the first line naming it (outside
    quoted strings)."""
    if expression.style in ("j2", "|"):
        return expression.line + jinja_line - 1
    lines = (Path(root) / expression.path).read_text().splitlines()
    word = re.compile(r"\b" + re.escape(name.lstrip(".")) + r"\b")
    for number in range(expression.line, expression.end_line + 1):
        if number - 1 < len(lines) and word.search(QUOTED.sub("", lines[number - 1])):
            return number
    return expression.line


def bare_uses(root, names=None, attrs=None):
    """Every bare use of a boolean switch in the collection at root, and every expression that does not parse."""
    if names is None:
        names, attrs = boolean_variables(root)
    found, unparsed = [], []
    for expression in expressions(root):
        try:
            tree = expression.parse()
        except jinja2.TemplateSyntaxError as error:
            unparsed.append(f"{expression.path}:{expression.line}: does not parse: {error}")
            continue
        for name, jinja_line in bare_uses_in_tree(tree, names, attrs or frozenset()):
            line = _line_of(root, expression, name, jinja_line)
            found.append(BareUse(expression.path, line, name, expression.text))
    return found, unparsed


def main(argv):
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    found, unparsed = bare_uses(root)
    for problem in unparsed:
        print(problem)
    for use in found:
        print(f"{use}  (write {use.name.lstrip('.')} | bool)")
    return 1 if found or unparsed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
