# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""What NCCL says it did, read from the ``NCCL_DEBUG=INFO`` lines of a run (``NCCL_DEBUG_SUBSYS=INIT,NET``).

Pure functions, no Ansible imports. Every pattern below is one of NCCL's own format strings (NVIDIA/nccl, src/),
so a reader can open the line that printed it:

- ``NCCL version %s`` (src/init.cc)
- ``Using network %s`` (src/init.cc): the transport between nodes, ``IB`` or ``Socket`` (or a plugin's name)
- ``NET/%s : GPU Direct RDMA %s for HCA %d '%s'`` (src/graph/topo.cc): per NIC, whether NCCL can give it GPU memory:
  enabled when nvidia-peermem is loaded (NCCL_PTR_CUDA) or when both the GPU and the HCA support DMA-BUF
  (NCCL_PTR_DMABUF), src/transport/net_ib/init.cc
- ``DMA-BUF is available on GPU device %d`` (src/init.cc): the GPU, the CUDA driver and NCCL_DMABUF_ENABLE allow it
- ``NVLS multicast support is %savailable on dev %d`` (src/transport/nvls.cc); not printed at all when
  NCCL_NVLS_ENABLE=0 or fewer than two GPUs
- ``Channel %02d/%d : %d[%d] -> %d[%d] [send|receive] via NET/%s/%d%s%s%s`` (src/transport/net.cc): a connection
  through the network; the suffix ``/GDRDMA`` when it reads and writes GPU memory directly

Which of the two GPUDirect paths a connection takes is not printed. NCCL registers memory through DMA-BUF whenever
the GPU side (the "DMA-BUF is available" line) and the NIC both allow it (``useDmaBuf = useGdr && dmaBufSupport &&
(ptrSupport & NCCL_PTR_DMABUF)``, src/transport/net.cc), else through nvidia-peermem. So a GPUDirect NIC on a host
where DMA-BUF is available is read as DMA-BUF, and otherwise as nvidia-peermem.
"""

import re

_INFO = r"NCCL INFO "
_VERSION_RE = re.compile(_INFO + r"NCCL version (?P<v>\S+)")
_NETWORK_RE = re.compile(_INFO + r"Using network (?P<net>\S+)")
_GDR_RE = re.compile(
    _INFO + r"NET/(?P<net>\S+) : GPU Direct RDMA (?P<state>Enabled|Disabled) for HCA (?P<n>\d+) '(?P<hca>[^']*)'"
)
_DMABUF_RE = re.compile(_INFO + r"DMA-BUF is available on GPU device (?P<dev>\d+)")
_NVLS_RE = re.compile(_INFO + r"NVLS multicast support is (?P<not>not )?available on dev (?P<dev>\d+)")
_CHANNEL_RE = re.compile(
    _INFO + r"Channel \d+/\d+ : \d+\[\d+\] -> \d+\[\d+\] \[(?:send|receive)\] via NET/(?P<net>[^/\s]+)/(?P<dev>\d+)"
    r"(?:\(\d+\))?(?P<gdr>/GDRDMA)?"
)

DATA_PATHS = ("dmabuf", "peermem", "none")


def parse_nccl_info(text):
    """The facts NCCL's INFO lines state about one run.

    Returns {info (bool: any INFO line), version, network, nics: {hca: {gdr: bool, index}}, dmabuf_gpus: [dev],
    nvls: True|False|None (None: no NVLS line), net_channels: {net_dev_index: {gdr: int, plain: int}}}.
    """
    result = {
        "info": False,
        "version": None,
        "network": None,
        "nics": {},
        "dmabuf_gpus": [],
        "nvls": None,
        "net_channels": {},
    }
    for line in (text or "").splitlines():
        if "NCCL INFO " not in line:
            continue
        result["info"] = True
        match = _VERSION_RE.search(line)
        if match:
            result["version"] = match.group("v")
            continue
        match = _NETWORK_RE.search(line)
        if match:
            result["network"] = match.group("net")
            continue
        match = _GDR_RE.search(line)
        if match:
            # NCCL prints the line for its Socket transport's NICs too (always Disabled): not an RDMA NIC.
            if match.group("net") != "Socket":
                result["nics"][match.group("hca")] = {
                    "gdr": match.group("state") == "Enabled",
                    "index": int(match.group("n")),
                }
            continue
        match = _DMABUF_RE.search(line)
        if match:
            dev = int(match.group("dev"))
            if dev not in result["dmabuf_gpus"]:
                result["dmabuf_gpus"].append(dev)
            continue
        match = _NVLS_RE.search(line)
        if match:
            available = not match.group("not")
            result["nvls"] = available if result["nvls"] is None else (result["nvls"] or available)
            continue
        match = _CHANNEL_RE.search(line)
        if match:
            counts = result["net_channels"].setdefault(int(match.group("dev")), {"gdr": 0, "plain": 0})
            counts["gdr" if match.group("gdr") else "plain"] += 1
    return result


def nic_data_paths(info):
    """{hca: 'dmabuf' | 'peermem' | 'none'}: the GPUDirect path NCCL had for each NIC it listed (see the module doc)."""
    paths = {}
    for hca, nic in sorted((info.get("nics") or {}).items()):
        if not nic["gdr"]:
            paths[hca] = "none"
        else:
            paths[hca] = "dmabuf" if info.get("dmabuf_gpus") else "peermem"
    return paths


def nvls_used(info, environment=None):
    """True, False or None (unknown): whether NVLink SHARP (NVLS) could be used in the run.

    The NVLS line decides when printed; without it, NCCL_NVLS_ENABLE=0 in the run's environment means off (NCCL skips
    the line then), and so does a run of INFO lines on fewer than two GPUs; otherwise it is unknown.
    """
    if info.get("nvls") is not None:
        return info["nvls"]
    value = str((environment or {}).get("NCCL_NVLS_ENABLE", "")).strip()
    if value == "0":
        return False
    return None
