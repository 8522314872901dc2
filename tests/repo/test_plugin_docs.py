"""Every filter and module of the collection has its own ansible-doc page.

ansible-doc shows a Python file's DOCUMENTATION for every filter that file defines, so a file holding several
filters gave each of them the first one's page. Each filter name that a FilterModule returns and each module (or
action) name must resolve, through ansible-doc itself, to a page whose name is that plugin's own, with a
short_description and a real author; modules also declare their attributes (check_mode, diff_mode).
"""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "gpucluster.fabric"
ANSIBLE_DOC = Path(sys.executable).parent / "ansible-doc"
UNKNOWN_AUTHOR = "(!UNKNOWN)"


def _filters_keys(path):
    """The names FilterModule.filters() returns, read from its dict literal (the file is not imported)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "FilterModule":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "filters":
                    returns = [n.value for n in ast.walk(item) if isinstance(n, ast.Return)]
                    if len(returns) != 1 or not isinstance(returns[0], ast.Dict):
                        raise AssertionError(f"{path}: filters() must return one dict literal for this test")
                    return [key.value for key in returns[0].keys]
    return []


def filter_names():
    return sorted(name for path in (ROOT / "plugins" / "filter").glob("*.py") for name in _filters_keys(path))


def module_names():
    stems = {path.stem for kind in ("modules", "action") for path in (ROOT / "plugins" / kind).glob("*.py")}
    return sorted(stems - {"__init__"})


@pytest.fixture(scope="module")
def doc_env(tmp_path_factory):
    root = tmp_path_factory.mktemp("collections")
    (root / "ansible_collections" / "gpucluster").mkdir(parents=True)
    (root / "ansible_collections" / "gpucluster" / "fabric").symlink_to(ROOT)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(root), ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_CONFIG", None)
    return env


def _ansible_doc(env, plugin_type, names):
    return subprocess.run(
        [str(ANSIBLE_DOC), "--json", "-t", plugin_type, *(f"{NAMESPACE}.{name}" for name in names)],
        env=env,
        cwd=env["ANSIBLE_COLLECTIONS_PATH"],
        capture_output=True,
        text=True,
        check=False,
    )


def pages(env, plugin_type, names):
    """{name: page or an error string}; one ansible-doc call, one per name only when that call fails."""
    result = _ansible_doc(env, plugin_type, names)
    if result.returncode == 0:
        data = json.loads(result.stdout)
        return {name: data.get(f"{NAMESPACE}.{name}") or "no page in ansible-doc's output" for name in names}
    found = {}
    for name in names:
        one = _ansible_doc(env, plugin_type, [name])
        if one.returncode:
            found[name] = f"ansible-doc failed: {one.stderr.strip() or one.stdout.strip()}"
        else:
            found[name] = json.loads(one.stdout).get(f"{NAMESPACE}.{name}") or "no page in ansible-doc's output"
    return found


def page_problems(name, page, module=False):
    if isinstance(page, str):
        return [f"{name}: {page}"]
    doc = page.get("doc") or {}
    problems = []
    shown = doc.get("module" if module else "name")
    if shown != name:
        problems.append(f"{name}: ansible-doc shows the page of {shown}")
    if not doc.get("short_description"):
        problems.append(f"{name}: no short_description")
    authors = doc.get("author") or []
    authors = [authors] if isinstance(authors, str) else authors
    if not authors or any(UNKNOWN_AUTHOR in author for author in authors):
        problems.append(f"{name}: author is {authors or 'missing'}; write gpucluster.fabric maintainers (@gpucluster)")
    if module:
        attributes = doc.get("attributes") or {}
        missing = [key for key in ("check_mode", "diff_mode") if key not in attributes]
        if missing:
            problems.append(f"{name}: attributes lack {', '.join(missing)}")
    if not page.get("examples"):
        problems.append(f"{name}: no EXAMPLES")
    return problems


def test_names_found():
    assert len(filter_names()) == len(set(filter_names())), "a filter name is defined twice"
    assert filter_names() and module_names()


def test_every_filter_has_its_own_page(doc_env):
    found = pages(doc_env, "filter", filter_names())
    problems = [problem for name, page in found.items() for problem in page_problems(name, page)]
    assert not problems, "\n".join(problems)


def test_every_module_has_its_own_page(doc_env):
    found = pages(doc_env, "module", module_names())
    problems = [problem for name, page in found.items() for problem in page_problems(name, page, module=True)]
    assert not problems, "\n".join(problems)
