from ansible_collections.gpucluster.fabric.plugins.module_utils.nvidia_smi import (
    gpu_nic_affinity,
    parse_nvidia_smi_q,
    parse_query_gpu_csv,
    parse_topo_matrix,
    strip_ansi,
    summarize_gpus,
    topo_rank,
)

# Shape of `nvidia-smi topo -m` on an 8-GPU node with NICs (NIC legend, double tab before GPU NUMA ID).
# Values are illustrative, not captured: the H200 fixture has one GPU and no NIC.
EIGHT_WAY_HEADER = (
    "\t\x1b[4mGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tNV18\tPXB\tSYS\t0-55,112-167\t0\t\tN/A\n"
    "GPU1\tNV18\t X \tSYS\tNODE\t56-111,168-223\t1\t\tN/A\n"
    "NIC0\tPXB\tSYS\t X \tSYS\t\t\t\t\n"
    "NIC1\tSYS\tNODE\tSYS\t X \t\t\t\t\n"
    "\nLegend:\n\n  X    = Self\n  PXB  = Connection traversing multiple PCIe bridges\n\n"
    "NIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n"
)


def test_topo_fixture_has_ansi_and_parses(fixture_text):
    raw = fixture_text("h200-1gpu/nvidia-smi-topo-m.txt")
    assert "\x1b[4m" in raw
    assert "\x1b" not in strip_ansi(raw)
    topo = parse_topo_matrix(raw)
    assert topo["devices"] == ["GPU0"]
    assert topo["extra_columns"] == ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    assert topo["matrix"] == {"GPU0": {"GPU0": "X"}}
    assert topo["affinity"]["GPU0"] == {"CPU Affinity": "0-15", "NUMA Affinity": "0", "GPU NUMA ID": "N/A"}
    assert topo["nic_names"] == {}


def test_no_nic_is_not_flagged_but_explained(fixture_text):
    topo = parse_topo_matrix(fixture_text("h200-1gpu/nvidia-smi-topo-m.txt"))
    assert gpu_nic_affinity(topo) == [
        {
            "gpu": "GPU0",
            "nic": None,
            "nic_device": None,
            "distance": None,
            "flagged": False,
            "reason": "no NIC in topology",
        }
    ]


def test_nearest_nic_and_flagging():
    topo = parse_topo_matrix(EIGHT_WAY_HEADER)
    assert topo["devices"] == ["GPU0", "GPU1", "NIC0", "NIC1"]
    assert topo["nic_names"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    assert topo["affinity"]["GPU1"]["CPU Affinity"] == "56-111,168-223"
    assert topo["affinity"]["GPU1"]["GPU NUMA ID"] == "N/A"
    result = {a["gpu"]: a for a in gpu_nic_affinity(topo)}
    assert result["GPU0"]["nic_device"] == "mlx5_0"
    assert result["GPU0"]["distance"] == "PXB"
    assert result["GPU0"]["flagged"] is False
    assert result["GPU1"]["nic_device"] == "mlx5_1"
    assert result["GPU1"]["distance"] == "NODE"
    assert result["GPU1"]["flagged"] is True
    assert "farther than PXB" in result["GPU1"]["reason"]
    # A site that accepts NODE (NCCL_NET_GDR_LEVEL=NODE) does not get the flag.
    assert not any(a["flagged"] for a in gpu_nic_affinity(topo, "NODE"))


def test_topo_rank_order():
    assert topo_rank("X") < topo_rank("NV18") < topo_rank("PIX") < topo_rank("PXB") < topo_rank("PHB")
    assert topo_rank("PHB") < topo_rank("NODE") < topo_rank("SYS") < topo_rank("???")


def test_query_gpu_csv(fixture_text):
    gpus = parse_query_gpu_csv(fixture_text("h200-1gpu/query-gpu.csv"))
    assert gpus == [
        {
            "index": "0",
            "name": "NVIDIA H200",
            "pci.bus_id": "00000000:00:06.0",
            "driver_version": "580.159.04",
            "memory.total": 143771,
            "memory.total_unit": "MiB",
        }
    ]


def test_nvidia_smi_q(fixture_text):
    parsed = parse_nvidia_smi_q(fixture_text("h200-1gpu/nvidia-smi-q.txt"))
    assert parsed["attributes"]["Driver Version"] == "580.159.04"
    assert parsed["attributes"]["CUDA Version"] == "13.0"
    assert parsed["attributes"]["Attached GPUs"] == "1"
    gpu = parsed["gpus"][0]
    assert gpu["bus_id"] == "00000000:00:06.0"
    assert gpu["Product Name"] == "NVIDIA H200"
    assert gpu["Product Architecture"] == "Hopper"
    assert gpu["MIG Mode"] == {"Current": "Disabled", "Pending": "Disabled"}
    assert gpu["PCI"]["GPU Link Info"]["PCIe Generation"]["Current"] == "5"
    assert gpu["PCI"]["GPU Link Info"]["Link Width"]["Current"] == "16x"
    assert gpu["FB Memory Usage"]["Total"] == "143771 MiB"
    assert gpu["ECC Errors"]["Volatile"]["DRAM Uncorrectable"] == "0"


def test_summarize_gpus(fixture_text):
    gpus = summarize_gpus(
        parse_query_gpu_csv(fixture_text("h200-1gpu/query-gpu.csv")),
        parse_nvidia_smi_q(fixture_text("h200-1gpu/nvidia-smi-q.txt")),
    )
    assert gpus == [
        {
            "index": 0,
            "name": "NVIDIA H200",
            "pci_bus_id": "00000000:00:06.0",
            "driver_version": "580.159.04",
            "memory_total_mib": 143771,
            "architecture": "Hopper",
        }
    ]


def test_topo_two_h200_nvlink(fixture_text):
    # Captured on the 2 x H200 accelerator host: GPUs joined by 18 bonded NVLinks, no NIC.
    topo = parse_topo_matrix(fixture_text("h200-2gpu/nvidia-smi-topo-m.txt"))
    assert topo["devices"] == ["GPU0", "GPU1"]
    assert topo["matrix"]["GPU0"]["GPU1"] == "NV18"
    assert topo["matrix"]["GPU1"]["GPU0"] == "NV18"
    assert topo["affinity"]["GPU1"] == {"CPU Affinity": "0-31", "NUMA Affinity": "0", "GPU NUMA ID": "N/A"}
    assert [entry["flagged"] for entry in gpu_nic_affinity(topo)] == [False, False]
