"""Which record the report judges for each host (action fabric_validate_report, ``hosts`` as a list of names).

A function of the action plugin, run without ansible-playbook: not under tests/unit/plugins/action, where the
version matrix expects the `playbook` tests only."""

import pytest
from ansible.errors import AnsibleActionFail
from ansible_collections.gpucluster.fabric.plugins.action.fabric_validate_report import host_records

RECORD = {"ib": {"rdma_present": False}, "rdma": []}


def test_the_tiers_record_first_else_the_collected_one_with_its_sminfo_answers():
    sminfo = {"results": [{"item": {"device": "ibsim0", "port": 1}, "rc": 0, "stdout": "ok", "stderr": ""}]}
    hostvars = {
        "measured": {"__fabric_validate_host": dict(RECORD, rdma=[{"test": "ib_write_bw"}], sm=[])},
        "health": {
            "__fabric_validate_collected": {"record": RECORD, "sm_query_host": "sm1"},
            "__fabric_validate_sminfo": sminfo,
        },
        "no_ports": {"__fabric_validate_collected": {"record": RECORD, "sm_query_host": "no_ports"}},
        # Asked in the collection's own call (the host queries for itself): its record is whole already, and the
        # sminfo task's loop was empty.
        "self": {
            "__fabric_validate_collected": {"record": dict(RECORD, sm=["asked"]), "sm_query_host": "self"},
            "__fabric_validate_sminfo": {"results": []},
        },
    }
    records = host_records(["measured", "health", "no_ports", "self"], hostvars)
    assert records["measured"] == hostvars["measured"]["__fabric_validate_host"]
    assert records["health"] == dict(
        RECORD, sm=[{"device": "ibsim0", "port": 1, "query_host": "sm1", "rc": 0, "stdout": "ok", "stderr": ""}]
    )
    assert records["no_ports"] == dict(RECORD, sm=[])
    assert records["self"] == dict(RECORD, sm=["asked"])


def test_a_host_without_a_record_is_an_error_naming_it():
    with pytest.raises(AnsibleActionFail, match="gpu9 has no record of what was read"):
        host_records(["gpu9"], {"gpu9": {"__fabric_validate_collected": {"ib": {}}}})
