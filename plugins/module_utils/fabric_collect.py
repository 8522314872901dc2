# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""What the health tier reads on a host, once: RDMA devices and ports (waiting a while for ports the subnet manager has
not made ACTIVE yet), GPUs and their nearest NICs, nccl.conf, the RoCE QoS, package versions, the fabric interfaces'
MTUs and, where asked, the subnet manager of each InfiniBand port (sminfo).

Module fabric_validate_collect runs it, and so does the node check (node_check.py) on the node itself. ``module`` is an
AnsibleModule or the node check's stand-in (get_bin_path and run_command). Standard library only (Python 3.8 targets).
"""

import os
import time

from .fabric_probe import GPU_ARGUMENT_SPEC, RDMA_ARGUMENT_SPEC, probe_gpus, probe_rdma
from .pcie import read_gpu_nic_paths, read_links
from .rdma_sysfs import read_interface_mtus
from .roce_qos_apply import Host, apply_all, module_runner
from .sminfo import query_all

GPU_KEYS = ("gpu_present", "skipped_reason", "failed_reason", "gpus", "affinity", "nic_count", "flagged")
# Module fabric_validate_collect's options (documented in plugins/modules/fabric_validate_collect.py).
ARGUMENT_SPEC = {
    "role_checks": {"type": "bool", "default": False},  # the action plugin's (controller side)
    "sm_query": {"type": "bool", "default": False},
    "sm_query_timeout": {"type": "int", "default": 15},
    "sm_query_environment": {"type": "dict", "default": {}},
    "record": {"type": "dict"},  # the action plugin's too
    # The health tier, judged here as the node check judges it (module fabric_validate_collect; the action plugin
    # adds the record's inputs): {host, expected, inputs}.
    "health": {"type": "dict"},
    **RDMA_ARGUMENT_SPEC,
    **GPU_ARGUMENT_SPEC,
    "nccl_conf_path": {"type": "path", "default": "/etc/nccl.conf"},
    "interfaces": {"type": "list", "elements": "dict", "default": []},
    "roce_qos": {"type": "dict", "default": {}},
    "packages": {"type": "list", "elements": "str", "default": []},
    "settle_seconds": {"type": "int", "default": 0},
    "settle_delay": {"type": "int", "default": 3},
}


class CollectError(Exception):
    """What could not be read; ``result``: what was read before it."""

    def __init__(self, msg, **result):
        super().__init__(msg)
        self.result = result


def read_nccl_conf(path):
    """(content or None when the file does not exist, error)."""
    if not os.path.exists(path):
        return None, None
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(), None
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror}"


def read_packages(module, names):
    """{name: installed version or None} from dpkg-query (no dpkg on the host: every package None)."""
    versions = dict.fromkeys(names)
    dpkg_query = module.get_bin_path("dpkg-query") if names else None
    if not dpkg_query:
        return versions
    # One call for all: dpkg-query prints the packages it knows and complains about the others (rc 1).
    _rc, out, _err = module.run_command(
        [dpkg_query, "-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n", *names],
        environ_update={"LC_ALL": "C"},
    )
    for line in out.splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[0] in versions and fields[2].startswith("ii"):
            versions[fields[0]] = fields[1]
    return versions


def waiting_for_sm(ib):
    """Ports that are LinkUp but INIT or ARMED: up, and waiting for the subnet manager to make them ACTIVE."""
    return [
        port
        for device in (ib or {}).get("devices") or []
        for port in device.get("ports") or []
        if port.get("phys_state") == "LinkUp" and port.get("state") in ("INIT", "ARMED")
    ]


def read_settled(module, params):
    """probe_rdma, read again every settle_delay seconds for up to settle_seconds while a port waits for the SM.
    Returns (ib, error, attempts)."""
    rereads = max(params["settle_seconds"], 0) // max(params["settle_delay"], 1)
    attempts = 0
    while True:
        ib, error = probe_rdma(module, params["root"], params["modules"], params["use_ibv_devinfo"])
        attempts += 1
        if error or attempts > rereads or not waiting_for_sm(ib):
            return ib, error, attempts
        time.sleep(max(params["settle_delay"], 1))


def collect(module, params):
    """Everything the health tier judges, read once (``params``: ARGUMENT_SPEC's options, validated). Raises
    CollectError when a part cannot be read."""
    ib, error, attempts = read_settled(module, params)
    if error:
        raise CollectError(error)
    gpu, error = probe_gpus(module, params["max_nic_distance"])
    if error:
        raise CollectError(error, ib=ib)
    content, error = read_nccl_conf(params["nccl_conf_path"])
    if error:
        raise CollectError(error, ib=ib)
    try:
        roce_qos = apply_all(Host(run=module_runner(module), check_mode=True), params["roce_qos"])  # reads only
    except OSError as exc:
        raise CollectError(f"cannot read the RoCE QoS: {exc.filename}: {exc.strerror}", ib=ib) from exc
    extra = {}
    links = read_links(params["root"])
    if params["sm_query"]:
        extra["sminfo"] = query_all(
            lambda argv, environment: module.run_command(argv, environ_update=environment),
            ib,
            params["sm_query_timeout"],
            params["sm_query_environment"],
        )
    return {
        **extra,
        "attempts": attempts,
        "roce_qos": roce_qos,
        "versions": {"packages": read_packages(module, params["packages"]), "kernel": os.uname().release},
        "ib": ib,
        "gpu": {key: gpu[key] for key in GPU_KEYS},
        "nccl_conf": {"path": params["nccl_conf_path"], "content": content},
        "interfaces": read_interface_mtus(params["interfaces"], params["root"]),
        # The PCIe links of the GPUs and RDMA NICs, and of the ports above them (pcie.read_links), and the ACS
        # control of each bridge between a GPU and a NIC.
        "pcie": links,
        "pcie_paths": read_gpu_nic_paths(params["root"], links, params["max_nic_distance"]),
    }
