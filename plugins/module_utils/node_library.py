# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The one way and the one place the collection puts code on a node that runs there without Ansible: the node check
(module node_check), role roce_qos' settings at boot, and role rdma_modules' ACS clearing at boot.

Each is a package of its own below LIBRARY, written by the module that owns it with ``ship``: the very source of the
module_utils modules it runs (``inspect.getsource``: the code the module itself ran, as Ansible shipped it with the
module) and, transitively, of every module they import relatively, laid out as below module_utils. Only files that
differ are written; a file another version of the collection left in the package is removed, and so is a package
that is no longer wanted. Standard library only (Python 3.8 targets).
"""

import ast
import inspect
import os
import sys

LIBRARY = "/usr/local/lib/gpucluster-fabric"
# Where versions before the one library put single files (roce_qos' boot code, pcie.py): removed where found.
LEGACY = "/usr/local/libexec/gpucluster"


def sources(*modules):
    """{path below the package: source} of ``modules`` (module_utils modules) and every module they import
    relatively, transitively: ``node_check.py``, a package's ``fabric_checks/__init__.py`` and its modules."""
    top = modules[0].__name__.rsplit(".", 1)[0]
    found, todo = {}, [module.__name__[len(top) + 1 :] for module in modules]
    while todo:
        name = todo.pop()
        module = sys.modules[f"{top}.{name}"]
        package = hasattr(module, "__path__")
        path = name.replace(".", "/") + ("/__init__.py" if package else ".py")
        if path in found:
            continue
        source = inspect.getsource(module)
        found[path] = source
        here = name.split(".") if package else name.split(".")[:-1]
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.level >= 1:
                base = here[: len(here) - (node.level - 1)]
                if node.module:
                    todo.append(".".join([*base, *node.module.split(".")]))
                else:
                    todo.extend(".".join([*base, alias.name]) for alias in node.names)
    return found


def ship(apply, package, modules, doc, wanted=True):
    """Make ``LIBRARY/package`` hold exactly ``modules`` with what they import (``sources``) and an ``__init__.py``
    saying ``doc``, or, not ``wanted``, be gone; each file only where it differs, with ``apply`` (the module's
    Applier, whose ``root`` stands for /). Returns the package's files, as absolute paths on the node."""
    directory = f"{LIBRARY}/{package}"
    if not wanted:
        apply.remove_directory(directory)
        return []
    files = {f"{directory}/{name}": source for name, source in sources(*modules).items()}
    files[f"{directory}/__init__.py"] = f'"""{doc}"""\n'
    for parent in sorted({LIBRARY, *(os.path.dirname(name) for name in files)}):
        apply.directory(parent)
    for name, source in sorted(files.items()):
        apply.file(name, source)
    for name in _installed(apply.path(directory), apply.path("/")):
        if name not in files:  # left by another version of the collection
            apply.file(name, None)
    return sorted(files)


def _installed(directory, root):
    """The .py files below ``directory`` (``root`` standing for /), as absolute paths on the host."""
    found = []
    for parent, _dirs, names in os.walk(directory):
        found += ["/" + os.path.relpath(os.path.join(parent, name), root) for name in names if name.endswith(".py")]
    return sorted(found)


def remove_legacy(apply, names):
    """Remove the single files ``names`` that versions before the one library put in LEGACY, and LEGACY itself once
    nothing else is in it."""
    for name in names:
        apply.file(f"{LEGACY}/{name}", None)
    real = apply.path(LEGACY)
    if os.path.isdir(real) and not set(os.listdir(real)) - set(names) - {"__pycache__"}:
        apply.remove_directory(LEGACY)
