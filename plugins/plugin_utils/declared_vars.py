# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The variable names the collection declares, and the inventory names it does not.

A misspelled variable (``nccl_versoin``) is otherwise silent: the role falls back to its default, or a play that
decides what to run from ``nccl_version is defined`` skips itself. The declared set is read from the collection's
own files every run, so it cannot drift from the roles:

- every option of every entry point in ``roles/*/meta/argument_specs.yml``;
- every variable in ``roles/*/defaults/main.yml``;
- every fact or result the roles publish (the registry of concerns says which: ``publishes``; no role task file is
  read) and the playbooks publish (``set_fact`` keys, ``register`` names, play-level ``vars:`` in ``playbooks/``), so
  a fact cached from an earlier run is never taken for a typo;
- every ``gpucluster_*`` name the playbooks read (the site-wide switches such as ``gpucluster_batch``).

Names starting with ``_`` are private and never declared.
"""

import difflib
import re
from pathlib import Path

import yaml

from ..module_utils import concerns

PREFIXES = ("rdma_", "cuda_repo_", "nccl_", "fabric_", "opensm_", "roce_qos_", "gpucluster_")
MODES = ("error", "warn", "ignore")

_SET_FACT = ("set_fact", "ansible.builtin.set_fact", "ansible.legacy.set_fact")
_SET_FACT_OPTIONS = ("cacheable",)
_SWITCH = re.compile(r"\bgpucluster_[a-z0-9_]+")

# Inventory contracts no role option carries: each host's port GUIDs, which an inventory's opensm_partitions read
# (inventories/example) and the lab's simulated fabric is built from (tests/lab/ibsim/gen_fabric.py).
INVENTORY_CONTRACT = frozenset({"fabric_port_guids"})


def has_prefix(name):
    return isinstance(name, str) and name.startswith(PREFIXES)


# libyaml's loader when PyYAML has it (as Ansible's own YAML loading prefers): the declared set is read on every run.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load(path):
    try:
        return yaml.load(path.read_text(), Loader=YAML_LOADER)  # noqa: S506 - a safe loader
    except (OSError, yaml.YAMLError):
        return None


def _public(names):
    return {name for name in names if isinstance(name, str) and not name.startswith("_")}


def _published(node):
    """Names a playbook (any nesting: plays, blocks) publishes through set_fact, register or play vars."""
    names = set()
    if isinstance(node, list):
        for item in node:
            names |= _published(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "register" and isinstance(value, str):
                names.add(value)
            elif key in _SET_FACT and isinstance(value, dict):
                names |= {name for name in value if name not in _SET_FACT_OPTIONS}
            elif key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
                names |= _published(value)
            elif key == "vars" and isinstance(value, dict) and "hosts" in node:
                names |= set(value)
    return names


def declared_names(root, published=None):
    """Every public variable name the collection at ``root`` declares, publishes or reads as a switch; ``published``:
    what its roles publish (the registry's by default)."""
    root = Path(root)
    names = set(concerns.published() if published is None else published)
    for role in sorted((root / "roles").iterdir()):
        specs = _load(role / "meta" / "argument_specs.yml") or {}
        for entry in (specs.get("argument_specs") or {}).values():
            names |= set((entry or {}).get("options") or {})
        names |= set(_load(role / "defaults" / "main.yml") or {})
    for playbook in sorted((root / "playbooks").glob("*.yml")):
        names |= _published(_load(playbook))
        names |= set(_SWITCH.findall(playbook.read_text()))
    return _public(names | INVENTORY_CONTRACT)


def undeclared(names, declared):
    """The names with one of our prefixes that are not declared, sorted."""
    return sorted({name for name in names if has_prefix(name)} - set(declared))


def undeclared_messages(host, names, declared):
    """One message per name with one of our prefixes that is not declared, closest declared name suggested."""
    declared = sorted(declared)
    messages = []
    for name in undeclared(names, declared):
        close = difflib.get_close_matches(name, declared, n=1)
        hint = f"did you mean {close[0]}?" if close else "no role of gpucluster.fabric declares it"
        messages.append(f"{host}: {name}: {hint}")
    return messages


def failure_message(messages):
    """The messages of one host as one failure, with the fix said once."""
    return (
        "; ".join(messages) + ". Fix or remove these variables (set gpucluster_unknown_vars=warn or ignore where a "
        "name with one of the collection's prefixes is your own)."
    )
