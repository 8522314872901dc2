"""One inventory through every consumer of a rule: the roles that apply a value and the checks that judge it agree.

Each test here feeds the same inventory to each place that reads it (the subnet manager's preflight and the GPU
node's, role nccl and fabric_validate's health tier, role fabric_interfaces and fabric_validate's defaults) and fails
when one of them accepts what another refuses.
"""

import copy
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.gpucluster.fabric.plugins.module_utils import fabric_mtu, nccl, opensm_partitions
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_checks import evaluate
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_model import roce_active_mtu
from ansible_collections.gpucluster.fabric.plugins.module_utils.rdma_sysfs import read_rdma_devices

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
GUIDS = {"sm1": ["0x0002c903000a1b2c"], "gpu1": ["0x0002c903000a1b2e"]}
GROUPS = {"all": ["sm1", "gpu1"], "ungrouped": [], "subnet_managers": ["sm1"], "gpu_nodes": ["gpu1"]}


def _health(host, data, active_mtu=4096):
    config = {"tiers": ["health"], "thresholds": {}, "references": [], "expected": {"active_mtu": active_mtu}}
    return evaluate({host: data}, config)["checks"]


# --- IPoIB on a partition: ipoib left out ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ipoib",
    [{}, {"ipoib": False}, {"ipoib": "no"}, {"ipoib": True, "mtu": 4096}],
    ids=["left-out", "false", "no", "true"],
)
def test_an_ipoib_child_is_judged_alike_by_the_sm_and_the_gpu_node(ipoib):
    """A child interface ib0.8101 on a partition: both preflights refuse it unless the partition has ipoib: true."""
    carried = ipoib.get("ipoib") is True
    members = [{"host": "gpu1", "membership": "full"}]
    partitions = [dict({"name": "tenant_a", "pkey": "0x0101", "members": members}, **ipoib)]
    child = [{"name": "ib0.8101", "kind": "ipoib", "mode": "datagram", "mtu": 4092}]
    hostvars = {host: {"fabric_port_guids": guids} for host, guids in GUIDS.items()}
    hostvars["gpu1"]["fabric_interfaces"] = child
    default = {"ipoib": True, "mtu": 4096}

    sm_errors = opensm_partitions.partition_errors(partitions, hostvars, GROUPS, default, "sm1")[1]
    gpu_errors = fabric_mtu.list_errors(child, "gpu1", partitions=partitions, default_partition=default)

    assert bool(sm_errors) is not carried, sm_errors
    assert bool(gpu_errors) is not carried, gpu_errors
    if not carried:
        assert any("ib0.8101" in error and "ipoib: true" in error for error in sm_errors), sm_errors
        assert any("ib0.8101" in error and "set ipoib: true" in error for error in gpu_errors), gpu_errors


# --- nccl.conf's debug-only variables -------------------------------------------------------------------------------


def _nccl_conf_check(lines, allowed=()):
    data = {
        "ib": {"rdma_present": False},
        "nccl_conf": {"path": "/etc/nccl.conf", "content": "".join(f"{line}\n" for line in lines)},
    }
    data["nccl_conf"]["allowed_debug"] = list(allowed)
    return next(check for check in _health("gpu1", data) if check["check"] == "nccl.conf")


NAMES = sorted(nccl.DEBUG_ONLY_VARIABLES) + ["NCCL_P2P_LEVEL", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "NCCL_DEBUG"]


@pytest.mark.parametrize("allowed", [False, True], ids=["refused", "allowed"])
@pytest.mark.parametrize("name", NAMES)
def test_role_nccl_writes_what_validation_passes(name, allowed):
    """What role nccl writes to nccl.conf, fabric_validate passes; what it refuses to write, validation fails."""
    allow = [name] if allowed and nccl.is_debug_only(name) else []
    written = nccl.conf_lines({name: "1"}, allow)
    check = _nccl_conf_check([f"{name}=1"], allow)
    assert (check["status"] == "passed") is (not written["errors"]), (written, check)
    if not written["errors"]:
        # and the file the role writes, as it writes it
        assert _nccl_conf_check(written["lines"], allow)["status"] == "passed"


# --- the RDMA MTU the fabric is built for ---------------------------------------------------------------------------


def _role_default(role, name, variables):
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())
    value = defaults[name]
    if isinstance(value, str):
        value = Templar(loader=DataLoader(), variables=variables).template(trust_as_template(value))
    return value


@pytest.mark.parametrize(("netdev_mtu", "min_rdma_mtu"), [(1500, 1024), (9000, 4096), (4200, 4096), (2200, 2048)])
def test_one_rdma_mtu_for_role_fabric_interfaces_and_validation(netdev_mtu, min_rdma_mtu):
    """fabric_interfaces_roce_min_rdma_mtu, set once: the netdev MTU the role accepts gives a port validation passes."""
    inventory = {"fabric_interfaces_roce_min_rdma_mtu": min_rdma_mtu}
    roce = [{"name": "ens1f0", "kind": "roce", "mtu": netdev_mtu}]
    assert fabric_mtu.list_errors(roce, "gpu1", roce_min_rdma_mtu=min_rdma_mtu) == []

    expected = int(_role_default("fabric_validate", "fabric_validate_expected_active_mtu", inventory))
    devices = copy.deepcopy(read_rdma_devices(str(FIXTURES / "sysfs-softroce-vm1")))
    for device in devices:
        for port in device["ports"]:
            port["active_mtu"] = roce_active_mtu(netdev_mtu)  # what the kernel gives that netdev MTU
    data = {"ib": {"rdma_present": True, "devices": devices, "modules_loaded": {}}}
    mtus = [check for check in _health("gpu1", data, expected) if check["check"].startswith("port.active_mtu")]
    assert mtus and all(check["status"] == "passed" for check in mtus), mtus

    # and a netdev MTU the role refuses gives a port validation fails
    too_small = min_rdma_mtu // 2 + 96 - 1 if min_rdma_mtu > 256 else None
    if too_small:
        assert fabric_mtu.list_errors([dict(roce[0], mtu=too_small)], "gpu1", roce_min_rdma_mtu=min_rdma_mtu)
        for device in devices:
            for port in device["ports"]:
                port["active_mtu"] = roce_active_mtu(too_small)
        mtus = [check for check in _health("gpu1", data, expected) if check["check"].startswith("port.active_mtu")]
        assert all(check["status"] == "failed" for check in mtus), mtus


def test_the_default_stays_4096_without_the_inventory_value():
    assert int(_role_default("fabric_validate", "fabric_validate_expected_active_mtu", {})) == 4096
