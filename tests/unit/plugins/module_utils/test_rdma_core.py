"""Role rdma_core's rules (plugins/module_utils/rdma_core.py): its input, the memlock files it writes."""

from ansible_collections.gpucluster.fabric.plugins.module_utils.rdma_core import input_errors, limits_conf, systemd_conf

GOOD_CORE = {
    "os_family": "Debian",
    "distribution": "Ubuntu",
    "supported_families": ["Debian"],
    "memlock": "unlimited",
    "extra_packages": ["ibutils2", "mft@4.2"],
    "services": ["rdma-ndd.service"],
}


def test_good_rdma_core_input():
    assert input_errors(GOOD_CORE) == []
    assert input_errors({**GOOD_CORE, "memlock": 67108864}) == []


def test_every_rdma_core_problem_at_once():
    errors = input_errors(
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


def test_limits_files():
    limits = limits_conf("#\n# Ansible managed\n#", "unlimited")
    assert limits.startswith("#\n# Ansible managed\n#\n# RDMA registers (pins) memory")
    assert limits.splitlines()[4:] == [
        "*     soft  memlock  unlimited",
        "*     hard  memlock  unlimited",
        "root  soft  memlock  unlimited",
        "root  hard  memlock  unlimited",
    ]
    assert systemd_conf("", "unlimited").endswith("[Manager]\nDefaultLimitMEMLOCK=infinity\n")
    # limits.conf counts KiB, systemd bytes
    assert systemd_conf("", "67108864").endswith("DefaultLimitMEMLOCK=68719476736\n")
