"""The collection's filter files import their logic at a filter's first call (plugins/plugin_utils/lazy.py).

Ansible loads every filter file that sorts before the one holding a filter, in every worker process, and compiles a
collection's Python from source at each import: what a filter file imports at its top is paid by every task that
uses a later filter. Run in a fresh interpreter, so that what other tests imported does not count."""

import json
import os
import subprocess
import sys

import ansible_collections.gpucluster.fabric as collection

# The directory that holds ansible_collections/ (tests/unit/conftest.py put it on sys.path), as given, not resolved.
COLLECTIONS_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(list(collection.__path__)[0])))

PROBE = r"""
import json, sys
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
_AnsibleCollectionFinder(paths=[sys.argv[1]])._install()
import importlib
prefix = "ansible_collections.gpucluster.fabric.plugins."
before = set(sys.modules)
filters = {}
for name in ("fabric_interfaces", "fabric_validate", "opensm", "port_guid", "preflight", "roce_qos"):
    filters.update(importlib.import_module(prefix + "filter." + name).FilterModule().filters())
loaded = sorted(m[len(prefix):] for m in set(sys.modules) - before if m.startswith(prefix + "module_utils"))
value = filters["port_guid"]("0002:C903:000A:1B2C")
ports = filters["fabric_sm_query_ports"]({"devices": [{"name": "mlx5_0", "ports": [
    {"port": 1, "phys_state": "LinkUp", "sm_lid": 1}]}]})
after = sorted(m[len(prefix):] for m in set(sys.modules) - before if m.startswith(prefix + "module_utils"))
print(json.dumps({"loaded": loaded, "value": value, "ports": ports, "after": after}))
"""


def test_filter_files_import_no_module_utils_until_a_filter_runs():
    out = subprocess.run(
        [sys.executable, "-c", PROBE, COLLECTIONS_ROOT], capture_output=True, text=True, check=True
    ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["loaded"] == []
    # The filters still run their module_utils' code, importing it then.
    assert result["value"] == "0x0002c903000a1b2c"
    assert result["ports"] == [{"device": "mlx5_0", "port": 1}]
    assert "module_utils.sminfo" in result["after"] and "module_utils.opensm_partitions" in result["after"]
