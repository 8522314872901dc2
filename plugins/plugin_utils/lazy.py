# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Filters whose code is imported at their first call, not when their file is loaded.

Ansible finds a collection filter by loading the collection's filter files in name order until one of them has it,
in every worker process (one per task and host), and a collection's Python is compiled from source at each import.
So whatever a filter file imports at its top is paid by every task that uses a filter of a file sorted after it:
module_utils/fabric_checks alone cost 25 ms per task. A filter file imports its logic through ``function``."""

import importlib

_PACKAGE = "ansible_collections.gpucluster.fabric.plugins."


def function(module, name):
    """A callable that runs ``plugins/<module>.py``'s ``name`` (``module`` like ``module_utils.fabric_checks``),
    importing that file at the first call."""

    def call(*args, **kwargs):
        return getattr(importlib.import_module(_PACKAGE + module), name)(*args, **kwargs)

    call.__name__ = name
    call.__qualname__ = name
    return call
