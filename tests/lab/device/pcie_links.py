#!/usr/bin/env python3
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""On the accelerator machine, from the repository root: the PCIe links as the health tier reads and judges them
(pcie.read_links, fabric_checks.health.pcie_checks) on the machine's real sysfs, printed as JSON, with the raw link
files of each device judged and of every directory above it (the capture tests/fixtures/ keeps).
Usage: python3 tests/lab/device/pcie_links.py [label]"""

import json
import os
import sys

root = "/tmp/c/ansible_collections/gpucluster"
os.makedirs(root, exist_ok=True)
if not os.path.exists(f"{root}/fabric"):
    os.symlink(os.getcwd(), f"{root}/fabric")
sys.path.insert(0, "/tmp/c")

from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_checks import (  # noqa: E402
    acs_checks,
    iommu_checks,
    pcie_checks,
)
from ansible_collections.gpucluster.fabric.plugins.module_utils.pcie import read_gpu_nic_paths, read_links  # noqa: E402

FILES = ("vendor", "device", "class", "current_link_speed", "current_link_width", "max_link_speed", "max_link_width")


def raw(path):
    found = {}
    for name in FILES:
        try:
            with open(os.path.join(path, name)) as handle:
                found[name] = handle.read().strip()
        except OSError as exc:
            found[name] = f"<{exc.strerror}>"
    return found


links = read_links("/")
paths = read_gpu_nic_paths("/", links)
tree = {}
for device in links:
    path = os.path.realpath(f"/sys/bus/pci/devices/{device['address']}")
    while path.startswith("/sys/devices/pci"):
        tree[path] = raw(path)
        path = os.path.dirname(path)
label = sys.argv[1] if len(sys.argv) > 1 else ""
print(
    json.dumps(
        {
            "label": label,
            "links": links,
            "paths": paths,
            "sysfs": tree,
            "checks": pcie_checks("device", {"pcie": links})
            + iommu_checks("device", {"pcie": links, "gpudirect": {"mode": "dmabuf"}})
            + acs_checks("device", {"pcie_paths": paths, "gpudirect": {"mode": "dmabuf"}}),
        },
        indent=2,
    )
)
