import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _load import ROOT, load  # noqa: E402

nccl = load("nccl")


def test_package_version_nvidia_form():
    assert nccl.package_version("2.21.5", "12.4") == "2.21.5-1+cuda12.4"
    assert nccl.package_version("2.11.4", "11.4", 1) == "2.11.4-1+cuda11.4"


@pytest.mark.parametrize(
    "nccl_version, cuda_version, fragment",
    [
        ("2.21", "12.4", "nccl_version='2.21'"),
        ("2.21.*", "12.4", "nccl_version='2.21.*'"),
        ("2.21.5-1", "12.4", "nccl_version='2.21.5-1'"),
        ("2.21.5", "12", "nccl_cuda_version='12'"),
        ("2.21.5", 12.4, "nccl_cuda_version=12.4"),  # unquoted YAML float
        ("2.21.5", "cuda12.4", "nccl_cuda_version='cuda12.4'"),
        ("02.21.5", "12.4", "nccl_version='02.21.5'"),
    ],
)
def test_malformed_versions(nccl_version, cuda_version, fragment):
    errors = nccl.version_errors(nccl_version, cuda_version)
    assert len(errors) == 1 and fragment in errors[0]
    with pytest.raises(ValueError):
        nccl.package_version(nccl_version, cuda_version)


@pytest.mark.parametrize("revision", [0, -1, "1", True])
def test_bad_revision(revision):
    assert any("nccl_package_revision" in e for e in nccl.version_errors("2.21.5", "12.4", revision))


def test_version_code_matches_nccl_h():
    # NCCL_VERSION_CODE from the nccl.h of the 2.21.5 and 2.23.4 wheels, and NCCL 2.8.4's old formula
    assert nccl.version_code("2.21.5") == 22105
    assert nccl.version_code("2.23.4") == 22304
    assert nccl.version_code("2.8.4") == 2804


def test_version_at_least():
    assert nccl.version_at_least("2.13.4", "2.13")
    assert not nccl.version_at_least("2.12.12", "2.13")
    assert nccl.version_at_least("6.1.0-28-amd64", "5.12")
    assert not nccl.version_at_least("5.4.0-200-generic", "5.12")
    assert nccl.version_at_least("39.0-1", "34")


def test_conf_renders_exact_lists_and_scalars():
    result = nccl.conf_lines(
        {
            "NCCL_SOCKET_IFNAME": ["ib0", "ib1"],
            "NCCL_IB_HCA": ["mlx5_1", "mlx5_2:1"],
            "NCCL_DEBUG": "WARN",
            "NCCL_IB_TC": 106,
            "NCCL_CROSS_NIC": False,
        }
    )
    assert result["errors"] == []
    assert result["lines"] == [  # sorted by name
        "NCCL_CROSS_NIC=0",
        "NCCL_DEBUG=WARN",
        "NCCL_IB_HCA==mlx5_1,mlx5_2:1",
        "NCCL_IB_TC=106",
        "NCCL_SOCKET_IFNAME==ib0,ib1",
    ]


def test_conf_raw_filter_strings_pass_with_prefix_note():
    result = nccl.conf_lines({"NCCL_IB_HCA": "mlx5_1", "NCCL_SOCKET_IFNAME": "^=docker0,lo"})
    assert result["errors"] == []
    assert result["lines"] == ["NCCL_IB_HCA=mlx5_1", "NCCL_SOCKET_IFNAME=^=docker0,lo"]
    assert nccl.conf_lines({"NCCL_SOCKET_IFNAME": "^lo", "NCCL_DEBUG": "WARN"})["lines"][0] == "NCCL_DEBUG=WARN"
    assert len(result["notes"]) == 1 and "mlx5_10" in result["notes"][0]


@pytest.mark.parametrize(
    "name",
    [
        "NCCL_ALGO",
        "NCCL_PROTO",
        "NCCL_BUFFSIZE",
        "NCCL_IB_DISABLE",
        "NCCL_NET_GDR_LEVEL",
        "NCCL_P2P_DISABLE",
        "NCCL_P2P_LEVEL",
        "NCCL_SHM_DISABLE",
        "NCCL_MIN_NCHANNELS",
        "NCCL_MAX_NCHANNELS",
    ],
)
def test_debug_only_refused_unless_allowed(name):
    refused = nccl.conf_lines({name: "1"})
    assert refused["lines"] == [] and len(refused["errors"]) == 1
    assert name in refused["errors"][0] and "nccl_conf_allow_debug_variables" in refused["errors"][0]
    allowed = nccl.conf_lines({name: "1"}, [name])
    assert allowed == {"lines": [name + "=1"], "errors": [], "notes": []}


def test_allow_list_must_name_debug_variables():
    result = nccl.conf_lines({"NCCL_DEBUG": "WARN"}, ["NCCL_DEBUG"])
    assert any("not a debug-only variable" in e for e in result["errors"])


@pytest.mark.parametrize(
    "settings, fragment",
    [
        ({"nccl_debug": "WARN"}, "not an NCCL variable name"),
        ({"NCCL DEBUG": "WARN"}, "not an NCCL variable name"),
        ({"NCCL_DEBUG": "WARN\nNCCL_ALGO=Ring"}, "control character"),
        ({"NCCL_DEBUG": ""}, "empty"),
        ({"NCCL_DEBUG": " WARN"}, "whitespace"),
        ({"NCCL_DEBUG": ["WARN"]}, "a list is only accepted"),
        ({"NCCL_SOCKET_IFNAME": ["ib0", "a-name-longer-than-15"]}, "not valid interface names"),
        ({"NCCL_IB_HCA": ["mlx5 1"]}, "not valid HCA"),
        ({"NCCL_IB_HCA": []}, "empty"),
        ({"NCCL_SOCKET_IFNAME": "ib0 ib1"}, "not NCCL filter syntax"),
        ({"NCCL_DEBUG": {"level": "WARN"}}, "must be a string"),
        ({"NCCL_CONF_FILE": "/x"}, "environment only"),
    ],
)
def test_conf_rejects(settings, fragment):
    result = nccl.conf_lines(settings)
    assert result["lines"] == []
    assert len(result["errors"]) == 1 and fragment in result["errors"][0], result["errors"]


def test_conf_not_a_mapping():
    assert nccl.conf_lines(["NCCL_DEBUG=WARN"])["errors"]


def load_table():
    import yaml

    data = yaml.safe_load((ROOT / "roles" / "nccl" / "vars" / "main.yml").read_text())
    return data["__nccl_feature_minimums"]


def test_table_rows_have_sources():
    table = load_table()
    assert table
    for row in table:
        assert set(row) == {"feature", "component", "minimum", "source"}, row
        assert row["source"].startswith("https://"), row
        nccl.version_tuple(str(row["minimum"]))


def test_dmabuf_needs_nccl_2_13():
    table = load_table()
    facts = {"nccl": "2.12.12", "kernel": "6.1.0-28-amd64", "rdma-core": "44.0", "cuda": "12.4"}
    report = nccl.feature_report(["dmabuf"], table, facts)
    assert len(report["errors"]) == 1 and "nccl >= 2.13" in report["errors"][0]
    facts["nccl"] = "2.21.5"
    report = nccl.feature_report(["dmabuf"], table, facts)
    assert report["errors"] == []
    assert any("kernel >= 5.12" in c for c in report["checked"])


def test_unknown_component_version_is_unchecked_not_passed():
    table = load_table()
    report = nccl.feature_report(["dmabuf"], table, {"nccl": "2.21.5", "kernel": "6.1.0", "rdma-core": None})
    assert report["errors"] == []
    assert any("rdma-core" in u for u in report["unchecked"])
    assert not any("rdma-core" in c for c in report["checked"])


def test_unknown_feature():
    report = nccl.feature_report(["warp-drive"], load_table(), {})
    assert "unknown feature 'warp-drive'" in report["errors"][0]


FIXTURES = ROOT / "tests" / "fixtures" / "nccl"


def test_parse_dpkg_query_captured():
    text = (FIXTURES / "dpkg-query-libnccl2-held-dev-removed.txt").read_text()
    assert nccl.parse_dpkg_query(text) == {"libnccl2": {"version": "2.21.5-1+cuda12.4", "held": True}}


def test_parse_dpkg_query_ignores_config_files_and_unheld():
    text = "libnccl2 2.21.5-1+cuda12.4 deinstall config-files\nlibnccl-dev 2.23.4-1+cuda12.6 install installed\n"
    assert nccl.parse_dpkg_query(text) == {"libnccl-dev": {"version": "2.23.4-1+cuda12.6", "held": False}}


def test_parse_madison_captured():
    offered = nccl.parse_madison((FIXTURES / "apt-cache-madison-lab-mirror.txt").read_text())
    assert offered == {
        "libnccl2": ["2.23.4-1+cuda12.6", "2.21.5-1+cuda12.4"],
        "libnccl-dev": ["2.23.4-1+cuda12.6", "2.21.5-1+cuda12.4"],
    }
    assert nccl.parse_madison("") == {}


def test_parse_package_index_keeps_only_nccl_packages():
    text = (
        "Package: cuda-keyring\nVersion: 1.1-1\n\n"
        "Package: libnccl2\nVersion: 2.21.5-1+cuda12.4\nArchitecture: amd64\n\n"
        "Package: libnccl-dev\nVersion: 2.21.5-1+cuda12.4\n\n"
        "Package: libnccl2\nVersion: 2.23.4-1+cuda12.6\n\n"
    )
    assert nccl.parse_package_index(text) == {
        "libnccl2": ["2.21.5-1+cuda12.4", "2.23.4-1+cuda12.6"],
        "libnccl-dev": ["2.21.5-1+cuda12.4"],
    }
    assert nccl.parse_package_index("") == {}


def test_release_index_sha256_reads_the_sha256_section_only():
    digest = "a" * 64
    release = (
        "Origin: NVIDIA\nMD5Sum:\n "
        + "b" * 32
        + " 10 Packages.gz\nSHA256:\n "
        + digest
        + " 10 Packages.gz\n "
        + "c" * 64
        + " 20 Packages\n"
    )
    assert nccl.release_index_sha256(release, "Packages.gz") == digest
    assert nccl.release_index_sha256(release, "Packages") == "c" * 64
    assert nccl.release_index_sha256(release, "Packages.xz") == ""


DPKG_HELD_2215 = "libnccl2 2.21.5-1+cuda12.4 hold installed\nlibnccl-dev 2.21.5-1+cuda12.4 hold installed\n"
MADISON = (
    "  libnccl2 | 2.21.5-1+cuda12.4 | http://mirror/compute/cuda/repos/debian12/x86_64  Packages\n"
    "  libnccl2 | 2.23.4-1+cuda12.6 | http://mirror/compute/cuda/repos/debian12/x86_64  Packages\n"
    "libnccl-dev | 2.21.5-1+cuda12.4 | http://mirror/compute/cuda/repos/debian12/x86_64  Packages\n"
)


def _decide(**kw):
    args = {
        "dpkg_text": "",
        "madison_text": MADISON,
        "package_version": "2.21.5-1+cuda12.4",
        "nccl_version": "2.21.5",
        "cuda_version": "12.4",
    }
    args.update(kw)
    return nccl.package_decision(**args)


def test_decision_no_op_host():
    result = _decide(dpkg_text=DPKG_HELD_2215)
    assert result["errors"] == [] and result["notes"] == []
    assert result["packages"] == ["libnccl2", "libnccl-dev"]  # dev is managed once installed
    assert result["installed"]["libnccl2"] == {"version": "2.21.5-1+cuda12.4", "held": True}
    assert result["unverifiable"] is False


def test_decision_fresh_host_installs_libnccl2_only():
    result = _decide()
    assert result["errors"] == [] and result["packages"] == ["libnccl2"]
    assert _decide(install_dev=True)["packages"] == ["libnccl2", "libnccl-dev"]


def test_decision_refuses_a_pair_not_offered():
    result = _decide(package_version="2.21.5-1+cuda12.6", cuda_version="12.6")
    (error,) = result["errors"]
    assert error.startswith("libnccl2 2.21.5-1+cuda12.6 (nccl_version=2.21.5, nccl_cuda_version=12.6) is not offered")
    assert "libnccl2 versions offered: 2.21.5-1+cuda12.4, 2.23.4-1+cuda12.6" in error
    assert "signed package index" not in error


def test_decision_refuses_a_version_change_without_opt_in():
    result = _decide(dpkg_text=DPKG_HELD_2215, package_version="2.23.4-1+cuda12.6", nccl_version="2.23.4")
    assert len(result["errors"]) == 2  # libnccl-dev 2.23.4 is not offered, and the change is not allowed
    change = result["errors"][1]
    assert change.startswith("installed libnccl2 2.21.5-1+cuda12.4 (held), libnccl-dev 2.21.5-1+cuda12.4 (held) but")
    assert "set nccl_allow_version_change: true" in change
    allowed = _decide(
        dpkg_text=DPKG_HELD_2215, package_version="2.23.4-1+cuda12.6", nccl_version="2.23.4", allow_version_change=True
    )
    assert not any("nccl_allow_version_change" in e for e in allowed["errors"])


def test_decision_before_the_repository_exists():
    # Site preflight on a fresh host: apt knows nothing yet; without the signed index nothing can be judged.
    result = _decide(madison_text="", before_repository=True)
    assert result["unverifiable"] is True and result["errors"] == []
    assert "nor its availability checked" in result["notes"][0]
    # With the index cuda_repo read, a pair it does not offer fails before any change.
    index = {"libnccl2": ["2.23.4-1+cuda12.6"]}
    result = _decide(madison_text="", before_repository=True, offered_index=index)
    assert "checked against the signed package index" in result["notes"][0]
    assert "apt does not know the CUDA repository yet: checked against its signed package index" in result["errors"][0]
    assert (
        _decide(madison_text="", before_repository=True, offered_index={"libnccl2": ["2.21.5-1+cuda12.4"]})["errors"]
        == []
    )
    # After cuda_repo ran for real, an empty apt offer is an error, not a note.
    after = _decide(madison_text="")
    assert after["unverifiable"] is False and "none (run gpucluster.fabric.cuda_repo first)" in after["errors"][0]


def test_package_state_in_place_and_holds():
    version = "2.21.5-1+cuda12.4"
    held = {"libnccl2": {"version": version, "held": True}}
    assert nccl.package_state(held, ["libnccl2"], version, True) == {"in_place": True, "hold_pending": []}
    # asked not to hold: the selection changes, apt has nothing to do
    assert nccl.package_state(held, ["libnccl2"], version, False) == {"in_place": True, "hold_pending": ["libnccl2"]}
    # the dev package asked for and missing; another build installed
    other = {"libnccl2": {"version": "2.23.4-1+cuda12.6", "held": True}}
    assert nccl.package_state(other, ["libnccl2", "libnccl-dev"], version, True) == {
        "in_place": False,
        "hold_pending": ["libnccl-dev"],
    }
    assert nccl.package_state({}, ["libnccl2"], version, True) == {"in_place": False, "hold_pending": ["libnccl2"]}


def test_the_address_family_is_one_setting_written_once():
    assert nccl.with_address_family({"NCCL_IB_TC": 106}, "ipv4") == ({"NCCL_IB_TC": 106}, [])
    six, errors = nccl.with_address_family({"NCCL_IB_TC": 106}, "ipv6")
    assert errors == [] and six == {"NCCL_IB_TC": 106, "NCCL_IB_ADDR_FAMILY": "AF_INET6"}
    assert "NCCL_IB_ADDR_FAMILY=AF_INET6" in nccl.conf_lines(six)["lines"]
    assert nccl.with_address_family({"NCCL_IB_ADDR_FAMILY": "AF_INET6"}, "ipv6")[1] == []
    _conf, errors = nccl.with_address_family({"NCCL_IB_ADDR_FAMILY": "AF_INET6"}, "ipv4")
    assert errors == [
        "nccl_conf: NCCL_IB_ADDR_FAMILY=AF_INET6 contradicts nccl_ib_addr_family=ipv4 (AF_INET); set "
        "nccl_ib_addr_family (ipv4 or ipv6) and leave NCCL_IB_ADDR_FAMILY out of nccl_conf"
    ]


SOFTROCE = str(ROOT / "tests" / "fixtures" / "sysfs-softroce-vm1")  # the kernel lab's rxe0 on eth1, as sysfs lays it


def _gid_params(**given):
    return {
        "ib_gid_index": "auto",
        "roce_interfaces": ["eth1"],
        "conf": {},
        "nccl_version": "2.18.5",
        "ib_addr_family": "ipv4",
        **given,
    }


def test_nccl_before_2_21_gets_the_index_of_the_roce_v2_gid_of_its_family():
    ports = nccl.roce_ports(["eth1"], SOFTROCE)
    assert list(ports) == ["eth1"] and ports["eth1"]["gid_table_size"] == 4
    assert nccl.gid_index(_gid_params(), ports) == (1, [], [])  # GID 1: RoCE v2 ::ffff:10.20.0.1
    assert nccl.gid_index(_gid_params(nccl_version="2.21.5"), ports) == (None, [], [])  # 2.21 chooses itself
    assert nccl.gid_index(_gid_params(roce_interfaces=[]), ports) == (None, [], [])  # InfiniBand: no GID index
    index, errors, (warning,) = nccl.gid_index(_gid_params(ib_addr_family="ipv6"), ports)
    assert index is None and errors == []
    assert "NCCL_IB_GID_INDEX is written once eth1 has a RoCE v2 ipv6 GID" in warning
    # Before role fabric_interfaces gave the interface its address (or created rxe0): written on the next run.
    assert nccl.gid_index(_gid_params(), {})[0] is None
    second = dict(ports["eth1"], gids=[dict(g, index=g["index"] + 2) for g in ports["eth1"]["gids"]])
    _index, (error,), _warnings = nccl.gid_index(
        _gid_params(roce_interfaces=["eth1", "eth2"]), {**ports, "eth2": second}
    )
    assert "their RoCE v2 ipv4 GIDs are at different indexes (eth1 1, eth2 3)" in error


def test_a_fixed_gid_index_is_written_inside_the_table_or_refused():
    ports = nccl.roce_ports(["eth1"], SOFTROCE)
    assert nccl.gid_index(_gid_params(ib_gid_index=3), ports) == (3, [], [])
    _index, (error,), _warnings = nccl.gid_index(_gid_params(ib_gid_index="7"), ports)
    assert error.startswith("nccl_ib_gid_index=7 is outside the GID table of eth1's RDMA port (4 entries, 0-3)")
    assert nccl.gid_index(_gid_params(ib_gid_index="any"), ports)[1] == [
        "nccl_ib_gid_index='any' is neither auto nor a GID index (0-255)"
    ]
    both = _gid_params(ib_gid_index=3, conf={"NCCL_IB_GID_INDEX": 3})
    assert nccl.gid_index(both, ports)[1] == [
        "nccl_conf sets NCCL_IB_GID_INDEX and nccl_ib_gid_index is not auto: set one of them"
    ]
    assert nccl.gid_index(_gid_params(conf={"NCCL_IB_GID_INDEX": 3}), ports) == (None, [], [])  # the site's own
