import pytest
from ansible_collections.gpucluster.fabric.plugins.filter.rdma import rdma_core_input_errors, rdma_modules_input_errors

GOOD_CORE = {
    "os_family": "Debian",
    "distribution": "Ubuntu",
    "supported_families": ["Debian"],
    "memlock": "unlimited",
    "extra_packages": ["ibutils2", "mft@4.2"],
    "services": ["rdma-ndd.service"],
}


def test_good_rdma_core_input():
    assert rdma_core_input_errors(GOOD_CORE) == []
    assert rdma_core_input_errors({**GOOD_CORE, "memlock": 67108864}) == []


def test_every_rdma_core_problem_at_once():
    errors = rdma_core_input_errors(
        {
            **GOOD_CORE,
            "os_family": "RedHat",
            "distribution": "Rocky",
            "memlock": "lots",
            "extra_packages": ["ok", "bad name!"],
            "services": ["$(reboot)"],
        }
    )
    assert errors == [
        "rdma_core supports Debian hosts (Debian, Ubuntu); this host is Rocky (RedHat).",
        'rdma_core_memlock=lots is not a limit; use "unlimited" or a size in KiB such as 67108864.',
        "bad name! in rdma_core_extra_packages is not a valid package name; remove it or fix its spelling.",
        "$(reboot) in rdma_core_services is not a valid unit name; remove it or fix its spelling.",
    ]


def test_good_rdma_modules_input():
    data = {
        "softdeps": [{"module": "mlx5_ib", "pre": ["mlx5_core"]}],
        "core": ["ib_core", "ib-uverbs"],
        "extra": [],
        "hca_unbound_modules": ["mlx5_core"],
        "hca_driver_map": {"mlx5_core": ["mlx5_core", "mlx5_ib"]},
    }
    assert rdma_modules_input_errors(data) == []


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"core": ["ib_core; reboot"]}, '"ib_core; reboot" in rdma_modules_core is not a kernel module name'),
        ({"extra": ["../x"]}, '"../x" in rdma_modules_extra is not'),
        ({"hca_driver_map": {"mlx5_core": ["$(id)"]}}, '"$(id)" in rdma_modules_hca_driver_map'),
        ({"hca_unbound_modules": ["a b"]}, '"a b" in rdma_modules_hca_unbound_modules'),
        ({"softdeps": [{"module": "x y"}]}, '"x y" in rdma_modules_softdeps'),
        ({"softdeps": [{"pre": ["a"]}]}, "rdma_modules_softdeps[0]="),
        ({"softdeps": [{"module": "a", "pre": "b"}]}, "needs a module name and lists for pre/post"),
    ],
)
def test_rdma_modules_problems(data, expected):
    errors = rdma_modules_input_errors(data)
    assert len(errors) == 1 and expected in errors[0], errors
