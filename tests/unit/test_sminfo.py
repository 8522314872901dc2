"""sminfo's output (infiniband-diags 44, real OpenSM 3.3.23 on the ibsim lab fabric: tests/fixtures/sminfo)."""

from pathlib import Path

import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils.sminfo import parse_sminfo, sminfo_outcome

SMINFO = Path(__file__).resolve().parents[1] / "fixtures" / "sminfo"


def _read(name):
    path = SMINFO / name
    return path.read_text() if path.exists() else ""


def _run(name):
    return _read(f"{name}.stdout"), _read(f"{name}.stderr")


def test_master_line_is_parsed():
    assert parse_sminfo(_read("master.stdout")) == {
        "lid": 1,
        "guid": "0x2c90300a00001",
        "activity_count": 164,
        "priority": 14,
        "state": 3,
        "state_name": "SMINFO_MASTER",
        "master": True,
    }


def test_standby_and_unknown_states_are_not_master():
    # The same printf (infiniband-diags/sminfo.c) with another state: STANDBY, and ??? for a value beyond 3.
    standby = parse_sminfo(
        "sminfo: sm lid 2 sm guid 0x2c90300a00002, activity count 7 priority 13 state 2 SMINFO_STANDBY"
    )
    assert standby["state_name"] == "SMINFO_STANDBY" and not standby["master"]
    assert parse_sminfo("sminfo: sm lid 2 sm guid 0x1, activity count 0 priority 0 state 7 ???")["state_name"] == "???"


@pytest.mark.parametrize("text", ["", None, "sminfo: iberror: failed: query\n"])
def test_no_line_is_none(text):
    assert parse_sminfo(text) is None


def test_answered():
    kind, detail = sminfo_outcome(0, *_run("master"))
    assert kind == "answered" and detail["master"] and detail["lid"] == 1


def test_stopped_sm_is_no_answer_with_sminfos_verdict():
    """OpenSM stopped: the port still has SM LID 1, and the query to it goes unanswered (rc 255)."""
    assert sminfo_outcome(255, *_run("sm-stopped")) == ("no_answer", "sminfo: iberror: failed: query")


def test_port_that_cannot_be_opened_here():
    """A lab GPU node (no umad device): the query never left this host."""
    assert sminfo_outcome(255, *_run("no-umad")) == (
        "cannot_query",
        "sminfo: iberror: failed: Failed to open 'ibsim0' port '1'",
    )


def test_not_installed():
    kind, detail = sminfo_outcome(127, *_run("not-installed"))
    assert kind == "not_installed"
    assert detail == "timeout: failed to run command 'sminfo': No such file or directory"


def test_timeout_and_unreached_query_host():
    assert sminfo_outcome(124, "", "")[0] == "timeout"
    assert sminfo_outcome(None, "", "Failed to connect to the host via ssh") == (
        "cannot_query",
        "Failed to connect to the host via ssh",
    )


def test_no_sm_lid():
    assert sminfo_outcome(255, "sminfo: iberror: failed: can't resolve sm port \n", "")[0] == "no_sm_lid"
