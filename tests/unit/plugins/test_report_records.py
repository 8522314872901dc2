"""Which record the report judges for each host (action fabric_validate_report, ``hosts`` as a list of names).

A function of the action plugin, run without ansible-playbook: not under tests/unit/plugins/action, where the
version matrix expects the `playbook` tests only."""

import pytest
from ansible.errors import AnsibleActionFail
from ansible_collections.gpucluster.fabric.plugins.action.fabric_validate_report import host_records

RECORD = {"ib": {"rdma_present": False}, "rdma": []}
PORT = {"port": 1, "phys_state": "LinkUp", "sm_lid": 1}
IB_RECORD = {"ib": {"rdma_present": True, "devices": [{"name": "ibsim0", "ports": [PORT]}]}, "rdma": []}


class Unread(dict):
    """A host's variables whose sminfo result must not be read (a loop without items registers skipped_reason,
    which ansible-core 2.21 warns about when another host's result is read whole)."""

    def __getitem__(self, key):
        if key == "__fabric_validate_sminfo":
            raise AssertionError("the sminfo result was read")
        return super().__getitem__(key)


def test_the_tiers_record_first_else_the_collected_one_with_its_sminfo_answers():
    sminfo = {"results": [{"item": {"device": "ibsim0", "port": 1}, "rc": 0, "stdout": "ok", "stderr": ""}]}
    hostvars = {
        "measured": {"__fabric_validate_host": dict(RECORD, rdma=[{"test": "ib_write_bw"}], sm=[])},
        "health": {
            "__fabric_validate_collected": {"record": IB_RECORD, "sm_query_host": "sm1"},
            "__fabric_validate_sminfo": sminfo,
        },
        "no_ports": Unread(
            __fabric_validate_collected={"record": RECORD, "sm_query_host": "no_ports"},
            __fabric_validate_sminfo={"results": [], "skipped": True, "skipped_reason": "No items in the list"},
        ),
        # Asked in the collection's own call (the host queries for itself): its record is whole already, and the
        # sminfo task's loop was empty.
        "self": Unread(
            __fabric_validate_collected={"record": dict(IB_RECORD, sm=["asked"]), "sm_query_host": "self"},
            __fabric_validate_sminfo={"results": [], "skipped": True, "skipped_reason": "No items in the list"},
        ),
    }
    records = host_records(["measured", "health", "no_ports", "self"], hostvars)
    assert records["measured"] == hostvars["measured"]["__fabric_validate_host"]
    assert records["health"] == dict(
        IB_RECORD, sm=[{"device": "ibsim0", "port": 1, "query_host": "sm1", "rc": 0, "stdout": "ok", "stderr": ""}]
    )
    assert records["no_ports"] == dict(RECORD, sm=[])
    assert records["self"] == dict(IB_RECORD, sm=["asked"])


def test_a_host_without_a_record_is_an_error_naming_it():
    with pytest.raises(AnsibleActionFail, match="gpu9 has no record of what was read"):
        host_records(["gpu9"], {"gpu9": {"__fabric_validate_collected": {"ib": {}}}})
