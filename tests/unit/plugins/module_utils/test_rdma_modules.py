"""Role rdma_modules' rules (plugins/module_utils/rdma_modules.py): its input, GPUDirect RDMA after nvidia_peermem."""

import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_model import interface_modules
from ansible_collections.gpucluster.fabric.plugins.module_utils.rdma_modules import gpudirect_outcome, input_errors


def test_good_rdma_modules_input():
    data = {
        "softdeps": [{"module": "mlx5_ib", "pre": ["mlx5_core"]}],
        "core_modules": ["ib_core", "ib-uverbs"],
        "extra_modules": [],
        "hca_unbound_modules": ["mlx5_core"],
        "hca_driver_map": {"mlx5_core": ["mlx5_core", "mlx5_ib"]},
    }
    assert input_errors(data) == []


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"core_modules": ["ib_core; reboot"]}, '"ib_core; reboot" in rdma_modules_core is not a kernel module name'),
        ({"extra_modules": ["../x"]}, '"../x" in rdma_modules_extra is not'),
        ({"hca_driver_map": {"mlx5_core": ["$(id)"]}}, '"$(id)" in rdma_modules_hca_driver_map'),
        ({"hca_unbound_modules": ["a b"]}, '"a b" in rdma_modules_hca_unbound_modules'),
        ({"softdeps": [{"module": "x y"}]}, '"x y" in rdma_modules_softdeps'),
        ({"softdeps": [{"pre": ["a"]}]}, "rdma_modules_softdeps[0]="),
        ({"softdeps": [{"module": "a", "pre": "b"}]}, "needs a module name and lists for pre/post"),
    ],
)
def test_rdma_modules_problems(data, expected):
    errors = input_errors(data)
    assert len(errors) == 1 and expected in errors[0], errors


PROBE = {
    "gpudirect": {"mode": "peermem", "reason": "nvidia-peermem: MLNX_OFED ib_core"},
    "runtime_load": {"load": True, "why": "not a container"},
    "facts": {
        "ib_core": {"evidence": "inbox (no PeerDirect symbol)"},
        "kernel": {"release": "6.1.0-18-amd64"},
        "peermem": {"persisted_in": []},
    },
}
SETTINGS = {"host": "gpu1", "mode": "auto", "force": False, "peermem_conf": "/etc/modules-load.d/g.conf"}
FAILED = {"rc": 1, "msg": "modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument\n", "failed": False}


def test_peermem_loaded_is_persisted():
    out = gpudirect_outcome(PROBE, {"changed": True, "name": "nvidia_peermem"}, SETTINGS)
    assert out["state"] == "loaded" and out["persist"] is True and out["fatal"] == "" and out["warnings"] == []
    assert out["record"] == {"mode": "peermem", "reason": "nvidia-peermem: MLNX_OFED ib_core"}


def test_peermem_failing_under_auto_turns_gpudirect_off_with_a_warning():
    out = gpudirect_outcome(PROBE, FAILED, SETTINGS)
    assert out["state"] == "failed" and out["persist"] is False and out["fatal"] == ""
    assert out["error"] == "modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument"
    assert out["record"]["mode"] == "none"
    assert out["record"]["reason"].endswith(", so it is not persisted and GPUDirect RDMA is off")
    (warning,) = out["warnings"]
    assert warning.startswith("WARNING gpu1: nvidia_peermem did not load (modprobe: ERROR")
    assert "inbox (no PeerDirect symbol)" in warning and "kernel 6.1.0-18-amd64" in warning


def test_peermem_failing_when_asked_for_is_fatal_unless_forced():
    out = gpudirect_outcome(PROBE, FAILED, {**SETTINGS, "mode": "peermem"})
    assert out["fatal"].startswith("gpu1: rdma_modules_gpudirect_mode=peermem, but nvidia_peermem did not load:")
    assert out["fatal"].endswith("To persist it anyway, set rdma_modules_peermem_force=true.")
    forced = gpudirect_outcome(PROBE, FAILED, {**SETTINGS, "mode": "peermem", "force": True})
    assert forced["fatal"] == "" and forced["persist"] is True and forced["record"]["mode"] == "peermem"
    assert "persisted anyway (rdma_modules_peermem_force)" in forced["record"]["reason"]
    assert "persisted anyway" in forced["warnings"][0]


def test_peermem_not_tried_in_a_container():
    out = gpudirect_outcome(PROBE, {"skipped": True}, SETTINGS)
    assert out["state"] == "not-tried" and out["persist"] is False and out["record"]["mode"] == "peermem"
    assert "nvidia_peermem not loaded now (not a container), so not persisted" in out["record"]["reason"]
    assert gpudirect_outcome(PROBE, {"skipped": True}, {**SETTINGS, "force": True})["persist"] is True


def test_other_modes_and_foreign_entries():
    dmabuf = {**PROBE, "gpudirect": {"mode": "dmabuf", "reason": "DMA-BUF: ..."}}
    out = gpudirect_outcome(dmabuf, {"skipped": True}, SETTINGS)
    assert out["persist"] is False and out["record"] == {"mode": "dmabuf", "reason": "DMA-BUF: ..."}
    assert out["warnings"] == []
    foreign = {**dmabuf, "facts": {**PROBE["facts"], "peermem": {"persisted_in": ["/etc/modules-load.d/x.conf"]}}}
    (warning,) = gpudirect_outcome(foreign, {"skipped": True}, SETTINGS)["warnings"]
    assert warning.startswith("WARNING gpu1: /etc/modules-load.d/x.conf load nvidia_peermem at boot")
    assert "GPUDirect RDMA here is dmabuf" in warning
    # No decision at all (no NVIDIA driver): nothing to load or persist.
    assert gpudirect_outcome({"facts": {}}, None, SETTINGS)["record"]["mode"] == "none"


def test_interface_modules():
    modules = interface_modules
    assert modules([]) == []
    assert modules([{"name": "ib0", "kind": "ipoib"}]) == ["ib_ipoib"]
    assert modules([{"name": "eth1", "kind": "roce", "softroce": "rxe0"}, {"name": "eth2", "kind": "roce"}]) == [
        "rdma_rxe"
    ]
    assert modules([{"name": "eth2", "kind": "roce", "softroce": ""}, "garbage"]) == []
