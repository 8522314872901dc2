"""Tenant isolation read back from the fabric: the parsers (module_utils/fabric_isolation.py) on the output real
ibnetdiscover and smpquery printed against OpenSM on the benchmark's ibsim fabric (tests/fixtures/isolation/), and
the judgement (fabric_checks.isolation_checks) against the intent's partition list, which is what OpenSM reads in
partitions.conf as role opensm renders it (read back here by a reader of OpenSM's grammar of the test's own). The
lab's fault test (tests/integration/test_site_faults.py) makes a port gain a P_Key on the running fabric."""

import re
from pathlib import Path

import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_checks import isolation_checks
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_isolation import (
    parse_ca_ports,
    parse_pkey_table,
    port_guid,
    wanted_pkeys,
)
from ansible_collections.gpucluster.fabric.plugins.module_utils.opensm_partitions import (
    partition_list,
    render_partitions_conf,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "isolation"
SM = "0x0002c90300d00001"
GPUS = [f"0x0002c90300d0{i:02x}01" for i in range(1, 17)]


def _model():
    return {
        "default": {"membership": "limited", "flags": ["ipoib", "mtu=5"], "full_members": {}},
        "partitions": [
            {"name": "training", "pkey": 0x0101, "flags": ["ipoib", "mtu=5"], "members": dict.fromkeys(GPUS, "full")}
        ],
    }


def _partitions():
    return partition_list(_model())


# OpenSM's partitions.conf grammar (doc/partition-config.txt), read here to prove the intent's partition list says what
# the rendered file says: ``Name[=PKey][,flag]... : member[, member]... ;``, a member without a suffix is limited.
_MEMBERSHIPS = ("full", "limited", "both")


def parse_partitions(text):
    """[{name, pkey (15 bits), members: [(member, membership)]}] of a partitions.conf text, comments dropped, in the
    file's order; a member is an ``ALL``-style word or a port_guid. Raises ValueError naming what it cannot read."""
    body = "\n".join(line.split("#", 1)[0] for line in (text or "").splitlines())
    partitions = []
    for statement in body.split(";"):
        if not statement.strip():
            continue
        if ":" not in statement:
            raise ValueError(f"a partition without ':' ({' '.join(statement.split())!r})")
        head, members_text = statement.split(":", 1)
        name, pkey_text = (head.split(",", 1)[0].strip().split("=", 1) + [""])[:2]
        pkey = int(pkey_text, 16) & 0x7FFF if pkey_text.strip() else None
        members = []
        for item in re.split(r"[,\s]+", members_text.strip()):
            if not item:
                continue
            member, membership = (item.split("=", 1) + [""])[:2]
            membership = membership or "limited"
            if membership not in _MEMBERSHIPS:
                raise ValueError(f"partition {name.strip()}: membership {membership!r} of {member}")
            members.append([member.upper() if not member.lower().startswith("0x") else port_guid(member), membership])
        partitions.append({"name": name.strip(), "pkey": pkey, "members": members})
    return partitions


@pytest.mark.parametrize(
    "default",
    [
        {"membership": "limited", "flags": ["ipoib", "mtu=5"], "full_members": {}},
        {"membership": "full", "flags": [], "full_members": {"0x0002c90300d00001": True}},
        {
            "membership": "limited",
            "flags": [],
            "full_members": {"0x0002c90300d00002": True, "0x0002c90300d00001": True},
        },
    ],
)
def test_the_partition_list_is_what_opensm_reads_in_the_rendered_file(default):
    model = _model()
    model["default"] = default
    model["partitions"].append(
        {"name": "mixed", "pkey": 0x0202, "flags": [], "members": {GPUS[1]: "both", GPUS[0]: "limited"}}
    )
    text = render_partitions_conf(model, header="#\n# Ansible managed\n#\n")
    assert parse_partitions(text) == partition_list(model)
    with pytest.raises(ValueError, match="membership 'fulll'"):
        parse_partitions("t=0x1 : 0x1=fulll ;")


def _fabric():
    ports = parse_ca_ports((FIXTURES / "ibnetdiscover-p.txt").read_text())
    gpu_table = parse_pkey_table((FIXTURES / "pkeys-gpu.txt").read_text())
    for port in ports:
        port["pkeys"] = list(gpu_table)  # laid out from bench-gpu-01's table, which every GPU node's port shares
    sm = {"lid": 1, "port": 1, "guid": SM, "description": "bench-sm-01 mlx5_0"}
    sm["pkeys"] = parse_pkey_table((FIXTURES / "pkeys-sm.txt").read_text())
    return [sm, *ports]


def test_the_captured_output_parses():
    ports = parse_ca_ports((FIXTURES / "ibnetdiscover-p.txt").read_text())
    assert [p["lid"] for p in ports] == list(range(5, 21)) and sorted(p["guid"] for p in ports) == GPUS
    assert ports[0] == {"lid": 5, "port": 1, "guid": GPUS[0], "description": "bench-gpu-01 mlx5_0"}
    assert parse_pkey_table((FIXTURES / "pkeys-gpu.txt").read_text()) == [0x7FFF, 0x8101]
    assert parse_pkey_table((FIXTURES / "pkeys-sm.txt").read_text()) == [0xFFFF]


def test_what_each_port_must_hold_follows_partitions_conf():
    partitions = _partitions()
    assert [(p["name"], p["pkey"]) for p in partitions] == [("Default", 0x7FFF), ("training", 0x0101)]
    assert wanted_pkeys(partitions, GPUS[0], SM) == {0x7FFF: "Default", 0x8101: "training"}
    assert wanted_pkeys(partitions, SM, SM) == {0xFFFF: "Default"}  # SELF=full wins over ALL=limited
    both = [
        {"name": "Default", "pkey": 0x7FFF, "members": [["ALL", "full"]]},
        {"name": "t", "pkey": 0x0202, "members": [["0x0000000000000001", "both"], ["0x0000000000000002", "limited"]]},
    ]
    assert wanted_pkeys(both, "0x0000000000000001") == {0xFFFF: "Default", 0x8202: "t", 0x0202: "t"}
    assert wanted_pkeys(both, "0x0000000000000002") == {0xFFFF: "Default", 0x0202: "t"}  # no suffix: limited


def test_the_fabric_as_opensm_left_it_isolates_every_tenant():
    checks = {c["check"]: c for c in isolation_checks("sm1", _partitions(), _fabric(), SM)}
    assert all(c["status"] == "passed" for c in checks.values()), [
        c for c in checks.values() if c["status"] != "passed"
    ]
    assert len([n for n in checks if n.startswith("partition.port[")]) == 17
    assert checks["partition[training]"]["message"] == "training (0x0101) is held by its 16 member port(s) only"
    assert checks[f"partition.port[{GPUS[0]}]"]["message"] == (
        f"{GPUS[0]} (bench-gpu-01 mlx5_0) holds 0x7fff (Default, limited), 0x8101 (training, full), as "
        "partitions.conf says"
    )


def test_a_port_that_gains_or_loses_a_pkey_fails_naming_it():
    fabric = _fabric()
    fabric[0]["pkeys"].append(0x8101)  # the subnet manager's port joins training: it is no member
    fabric[1]["pkeys"] = [0x7FFF]  # a GPU node's port lost training
    fabric[2]["pkeys"].append(0x0202)  # a P_Key no partition has
    fabric[3]["pkeys"], fabric[3]["error"] = None, "smpquery timed out"
    checks = {c["check"]: c for c in isolation_checks("sm1", _partitions(), fabric, SM)}
    sm = checks[f"partition.port[{SM}]"]
    assert (
        sm["status"] == "failed"
        and "holds 0x8101 (training, full), which its partitions do not give it" in sm["message"]
    )
    lost = checks[f"partition.port[{fabric[1]['guid']}]"]
    assert lost["status"] == "failed" and "lacks 0x8101 (training, full)" in lost["message"]
    stray = checks[f"partition.port[{fabric[2]['guid']}]"]
    assert "holds 0x0202 (limited; no partition has it)" in stray["message"]
    unread = checks[f"partition.port[{fabric[3]['guid']}]"]
    assert unread["status"] == "failed" and "could not be read (smpquery timed out)" in unread["message"]
    training = checks["partition[training]"]
    assert training["status"] == "failed"
    assert training["message"] == (
        f"training (0x0101): held by 1 port(s) that are not members: {SM}; not held by 1 member port(s): "
        f"{fabric[1]['guid']}; 1 port(s) could not be read, any of which may hold it: {fabric[3]['guid']}"
    )


def test_isolation_fails_closed_when_a_port_does_not_answer():
    """A P_Key table that cannot be read is never a pass: that port fails, and so does every partition, which the
    silent port may hold."""
    fabric = _fabric()
    fabric[2]["pkeys"], fabric[2]["error"] = None, "smpquery: timed out after 5 s"
    checks = {c["check"]: c for c in isolation_checks("sm1", _partitions(), fabric, SM)}
    assert checks[f"partition.port[{fabric[2]['guid']}]"]["status"] == "failed"
    assert checks["partition[Default]"]["status"] == "failed" and checks["partition[training]"]["status"] == "failed"
    assert all(c["status"] == "passed" for name, c in checks.items() if name.startswith("partition.port[")
               and fabric[2]["guid"] not in name)  # fmt: skip


class _Smp:
    """node_check's command runner, answered from the captures: ``ibnetdiscover -p``, and ``smpquery pkeys <LID>``
    refused once for the LIDs of ``refuse_once`` (as ibsim refuses a connection when too many clients ask at once),
    timed out for those of ``silent``; every call recorded."""

    def __init__(self, refuse_once=(), silent=()):
        self.refuse_once, self.silent, self.calls = set(refuse_once), set(silent), []

    @staticmethod
    def get_bin_path(arg, required=False, opt_dirs=None):
        return f"/usr/bin/{arg}"

    def run_command(self, args, **_kwargs):
        self.calls.append(args[2:])
        if args[2] == "ibnetdiscover":
            return 0, (FIXTURES / "ibnetdiscover-p.txt").read_text(), ""
        lid = int(args[-1])
        if lid in self.silent:
            return 124, "", "smpquery: timed out after 5 s (the node check's limit for one command)"
        if lid in self.refuse_once:
            self.refuse_once.discard(lid)
            return 1, "", "ibwarn: [5856] sim_ctl: ctl error ibpanic: [5856] sim_init: connect failed: Success"
        name = "pkeys-sm.txt" if lid == 1 else "pkeys-gpu.txt"
        return 0, (FIXTURES / name).read_text(), ""


def test_a_read_refused_at_once_is_read_again_and_a_silent_port_is_not():
    """The node check's reader (node_check.isolation): a port whose smpquery was refused at once is read once more
    (fewer at a time), and passes when it answers; one that ran out of time is not read again and fails closed."""
    from ansible_collections.gpucluster.fabric.plugins.module_utils import node_check

    opensm = {"partition_list": _partitions(), "diag_environment": {}}
    module = _Smp(refuse_once=(5, 9, 13))
    checks = {c["check"]: c for c in node_check.isolation("sm1", opensm, module, SM)}
    assert all(c["status"] == "passed" for c in checks.values()), checks
    reads = [call[-1] for call in module.calls if call[0] == "smpquery"]
    assert len(reads) == 16 + 3 and sorted(reads[16:]) == ["13", "5", "9"]  # the three refused, once more each
    module = _Smp(silent=(5,), refuse_once=(6,))
    checks = {c["check"]: c for c in node_check.isolation("sm1", opensm, module, SM)}
    reads = [call[-1] for call in module.calls if call[0] == "smpquery"]
    assert reads.count("5") == 1 and reads.count("6") == 2
    silent = checks[f"partition.port[{GPUS[0]}]"]
    assert silent["status"] == "failed" and "timed out after 5 s" in silent["message"]
    assert checks["partition[training]"]["status"] == "failed"  # isolation fails closed
