# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Read a host's RDMA ports and GPUs the way the info modules do, shared by ib_port_info, gpu_topology_info and
fabric_validate_collect.

Each function takes the running AnsibleModule (for get_bin_path, run_command and warn) and returns plain data; the
parsing itself lives in rdma_sysfs and nvidia_smi.
"""

import os

from .nvidia_smi import (
    gpu_nic_affinity,
    parse_query_gpu_csv,
    parse_topo_matrix,
    summarize_gpus,
)
from .rdma_sysfs import (
    loaded_modules,
    merge_ibv_devinfo,
    parse_ibv_devinfo,
    read_rdma_devices,
)

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}
QUERY_FIELDS = "index,name,pci.bus_id,driver_version,memory.total"
NIC_DISTANCES = ["PIX", "PXB", "PHB", "NODE", "SYS"]
# Documented in plugins/doc_fragments/fabric_probe.py (RDMA and GPU).
RDMA_ARGUMENT_SPEC = {
    "root": {"type": "path", "default": "/"},
    "modules": {"type": "list", "elements": "str", "default": []},
    "use_ibv_devinfo": {"type": "bool", "default": True},
}
GPU_ARGUMENT_SPEC = {
    "max_nic_distance": {"type": "str", "default": "PXB", "choices": NIC_DISTANCES},
}


def probe_rdma(module, root, modules, use_ibv_devinfo=True):
    """{rdma_present, devices, modules_loaded} below ``root``; ``ibv_devinfo -v`` supplies active MTUs on the live
    system (root /) when it is installed. Returns (result, error); error names a root that is not a directory."""
    if not os.path.isdir(root):
        return None, f"root={root} is not a directory"
    devices = read_rdma_devices(root)
    if devices and use_ibv_devinfo and os.path.realpath(root) == "/":
        ibv_devinfo = module.get_bin_path("ibv_devinfo")
        if ibv_devinfo:
            module.run_command_environ_update = C_LOCALE
            rc, out, err = module.run_command([ibv_devinfo, "-v"])
            if rc == 0:
                merge_ibv_devinfo(devices, parse_ibv_devinfo(out))
            else:
                module.warn(f"ibv_devinfo -v failed (rc={rc}): {err.strip()}")
    return {"rdma_present": bool(devices), "devices": devices, "modules_loaded": loaded_modules(modules, root)}, None


def _run(module, binary, args):
    rc, out, err = module.run_command([binary] + args)
    if rc != 0:
        return None, f"nvidia-smi {' '.join(args)} failed (rc={rc}): {(err or out).strip()}"
    return out, None


def probe_gpus(module, max_nic_distance="PXB", topo_text=None, query_text=None):
    """GPUs and GPU to NIC affinity from nvidia-smi (or captured output). Returns (result, error): a host without
    nvidia-smi gives gpu_present=false with skipped_reason, one whose nvidia-smi fails (no usable driver or GPU)
    gives failed_reason; error is set only when ``nvidia-smi topo -m`` fails after the query worked."""
    result = {
        "gpu_present": False,
        "skipped_reason": None,
        "failed_reason": None,
        "gpus": [],
        "topology": {},
        "affinity": [],
        "nic_count": 0,
        "flagged": [],
    }
    if topo_text is None:
        binary = module.get_bin_path("nvidia-smi")
        if not binary:
            result["skipped_reason"] = "nvidia-smi not found"
            return result, None
        module.run_command_environ_update = C_LOCALE
        query_text, error = _run(module, binary, ["--query-gpu=" + QUERY_FIELDS, "--format=csv"])
        if error:
            # nvidia-smi installed but failing (a GPU off the bus, a driver that does not answer, a hang): a fault
            # of the host, never a pass or a skip.
            result["failed_reason"] = error
            return result, None
        topo_text, error = _run(module, binary, ["topo", "-m"])
        if error:
            return result, error
    gpus = summarize_gpus(parse_query_gpu_csv(query_text))
    topology = parse_topo_matrix(topo_text)
    affinity = gpu_nic_affinity(topology, max_nic_distance)
    result.update(
        gpu_present=bool(gpus),
        skipped_reason=None if gpus else "no GPU reported by nvidia-smi",
        gpus=gpus,
        topology=topology,
        affinity=affinity,
        nic_count=len([d for d in topology["devices"] if not d.startswith("GPU")]),
        flagged=[a["gpu"] for a in affinity if a["flagged"]],
    )
    return result, None
