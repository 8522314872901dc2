# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Parse nvidia-smi output: ``topo -m`` (ANSI escapes, legend), ``--query-gpu`` CSV and ``-q``.

Pure functions, no Ansible imports: unit-tested on output captured on a real H200 in tests/fixtures/h200-1gpu.
"""

import csv
import re

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_NIC_LEGEND_RE = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_GPU_SECTION_RE = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")
_UNIT_RE = re.compile(r"^(?P<key>.*?)\s*\[(?P<unit>[^\]]+)\]\s*$")

# nvidia-smi topo -m connection types, nearest first.  NCCL uses GPUDirect RDMA up to NCCL_NET_GDR_LEVEL,
# whose default is PXB: anything farther (PHB, NODE, SYS) is flagged.
TOPO_DISTANCE_ORDER = ("X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS")
GDR_MAX_DISTANCE = "PXB"


def strip_ansi(text):
    return _ANSI_RE.sub("", text or "")


def topo_rank(value):
    """Rank of a topo -m cell (lower is nearer); NV# counts as NV. Unknown values rank last."""
    value = (value or "").strip()
    if value.startswith("NV") and value[2:].isdigit():
        value = "NV"
    try:
        return TOPO_DISTANCE_ORDER.index(value)
    except ValueError:
        return len(TOPO_DISTANCE_ORDER)


def parse_topo_matrix(text):
    """Parse ``nvidia-smi topo -m``.

    Returns: devices (column names before 'CPU Affinity': GPUn, NICn or, on older drivers, mlx5_n),
    extra_columns (CPU Affinity, NUMA Affinity, ...), matrix {row: {column: value}}, affinity {row: {extra: value}},
    nic_names {NICn: mlx5_n} from the NIC Legend.
    """
    lines = strip_ansi(text).splitlines()
    header = None
    devices = []
    extra = []
    matrix = {}
    affinity = {}
    nic_names = {}
    for line in lines:
        legend = _NIC_LEGEND_RE.match(line)
        if legend:
            nic_names[legend.group(1)] = legend.group(2)
            continue
        if header is None:
            if line.startswith("\t") and "GPU0" in line:
                header = [c.strip() for c in line.split("\t")[1:] if c.strip()]
                cut = header.index("CPU Affinity") if "CPU Affinity" in header else len(header)
                devices = header[:cut]
                extra = header[cut:]
            continue
        fields = line.split("\t")
        name = fields[0].strip()
        if name not in devices:
            continue
        cells = [f.strip() for f in fields[1 : 1 + len(devices)]]
        matrix[name] = dict(zip(devices, cells))
        rest = [f.strip() for f in fields[1 + len(devices) :] if f.strip()]
        affinity[name] = dict(zip(extra, rest))
    return {
        "devices": devices,
        "extra_columns": extra,
        "matrix": matrix,
        "affinity": affinity,
        "nic_names": nic_names,
    }


def gpu_nic_affinity(topo, max_distance=GDR_MAX_DISTANCE):
    """For each GPU: the nearest NIC(s) and their distance, flagged when farther than ``max_distance``.

    A host without any NIC column yields nic=None and flagged=False with reason 'no NIC in topology' — the caller
    reports that as skipped, never as passed.
    """
    devices = topo["devices"]
    gpus = [d for d in devices if d.startswith("GPU")]
    nics = [d for d in devices if not d.startswith("GPU")]
    limit = topo_rank(max_distance)
    result = []
    for gpu in gpus:
        row = topo["matrix"].get(gpu, {})
        entry = {"gpu": gpu, "nic": None, "nic_device": None, "distance": None, "flagged": False, "reason": None}
        if not nics:
            entry["reason"] = "no NIC in topology"
            result.append(entry)
            continue
        nearest = min(nics, key=lambda n: (topo_rank(row.get(n)), nics.index(n)))
        distance = row.get(nearest)
        entry.update(
            {
                "nic": nearest,
                "nic_device": topo["nic_names"].get(nearest, nearest),
                "distance": distance,
                "flagged": topo_rank(distance) > limit,
            }
        )
        if entry["flagged"]:
            entry["reason"] = (
                "nearest NIC {} is {}, farther than {}: GPUDirect RDMA will not be used by default".format(
                    entry["nic_device"],
                    distance,
                    max_distance,
                )
            )
        result.append(entry)
    return result


def _csv_value(value, unit):
    value = value.strip()
    if unit and value.endswith(" " + unit):
        number = value[: -len(unit) - 1].strip()
        try:
            return int(number)
        except ValueError:
            try:
                return float(number)
            except ValueError:
                return value
    return value


def parse_query_gpu_csv(text):
    """Parse ``nvidia-smi --query-gpu=... --format=csv``: one dict per GPU; '[MiB]'-style units are stripped
    from keys and values (memory.total '143771 MiB' → memory.total 143771, with memory.total_unit 'MiB')."""
    rows = list(csv.reader([line for line in (text or "").splitlines() if line.strip()], skipinitialspace=True))
    if not rows:
        return []
    keys = []
    units = []
    for column in rows[0]:
        match = _UNIT_RE.match(column.strip())
        keys.append(match.group("key") if match else column.strip())
        units.append(match.group("unit") if match else None)
    gpus = []
    for row in rows[1:]:
        gpu = {}
        for key, unit, value in zip(keys, units, row):
            gpu[key] = _csv_value(value, unit)
            if unit:
                gpu[key + "_unit"] = unit
        gpus.append(gpu)
    return gpus


def parse_nvidia_smi_q(text):
    """Parse ``nvidia-smi -q`` into nested dicts by indentation. GPU sections are returned in ``gpus``
    (each with its ``bus_id``); top-level fields (Driver Version, CUDA Version, ...) in ``attributes``."""
    root = {}
    gpus = []
    stack = [(-1, root)]
    for raw in (text or "").splitlines():
        if not raw.strip() or raw.startswith("="):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        line = raw.strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if indent == 0 and _GPU_SECTION_RE.match(line):
            section = {"bus_id": line[4:].strip()}
            gpus.append(section)
            stack.append((indent, section))
            continue
        if " : " in line or line.endswith(":"):
            key, _sep, value = line.partition(":")
            parent[key.strip()] = value.strip()
        else:
            section = {}
            parent[line] = section
            stack.append((indent, section))
    return {"attributes": root, "gpus": gpus}


def summarize_gpus(query_gpus, smi_q=None):
    """Facts per GPU from the CSV, with the product architecture from ``-q`` when given."""
    arch = {}
    for gpu in (smi_q or {}).get("gpus", []):
        arch[gpu["bus_id"].lower()] = gpu.get("Product Architecture")
    result = []
    for gpu in query_gpus:
        bus = str(gpu.get("pci.bus_id", "")).lower()
        entry = {
            "index": int(gpu["index"]) if str(gpu.get("index", "")).isdigit() else gpu.get("index"),
            "name": gpu.get("name"),
            "pci_bus_id": gpu.get("pci.bus_id"),
            "driver_version": gpu.get("driver_version"),
            "memory_total_mib": gpu.get("memory.total"),
        }
        if bus in arch:
            entry["architecture"] = arch[bus]
        result.append(entry)
    return result
