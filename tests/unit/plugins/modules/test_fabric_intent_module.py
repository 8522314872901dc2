"""Module fabric_intent run as Ansible runs it, its file below a tree: written once, root-only, masked, with a diff."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _process  # noqa: E402

INTENT = {
    "schema": 1,
    "host": "gpu1",
    "roles": {"cuda_repo": {"base_url": "https://u:pw@mirror/cuda/"}, "nccl": {"nccl_version": "2.21.5"}},
}
FILE = "etc/gpucluster/fabric.json"


def run_module(tmp_path, check=False, diff=False, **args):
    return _process.run_module("fabric_intent", tmp_path, check, diff, **{"host": "gpu1", **args})


def test_written_once_root_only_without_the_password(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    predicted = run_module(tmp_path, check=True, diff=True, root=str(root), intent=INTENT)
    assert predicted["changed"] is True and not (root / "etc").exists()
    assert predicted["changes"] == [{"what": "/etc/gpucluster/fabric.json", "why": "it is missing"}]
    assert '"nccl_version": "2.21.5"' in predicted["diff"][0]["after"]
    first = run_module(tmp_path, root=str(root), intent=INTENT)
    assert first["changed"] is True
    written = (root / FILE).read_text()
    assert "pw" not in written and json.loads(written)["roles"]["cuda_repo"]["base_url"] == "https://***@mirror/cuda/"
    assert (os.stat(root / FILE).st_mode & 0o777) == 0o600
    assert run_module(tmp_path, root=str(root), intent=INTENT)["changed"] is False
    os.chmod(root / FILE, 0o644)  # a mode someone widened is put back
    again = run_module(tmp_path, root=str(root), intent=INTENT)
    assert again["changed"] is True and (os.stat(root / FILE).st_mode & 0o777) == 0o600


def test_without_an_intent_it_fails_with_the_fix_and_writes_nothing(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    result = run_module(tmp_path, root=str(root))
    assert result["failed"] is True and list(root.iterdir()) == []
    assert result["msg"].startswith("gpu1: no intent: run gpucluster.fabric.preflight earlier in the same run")


def test_with_role_node_check_the_same_call_installs_the_check_below_the_tree(tmp_path):
    """The intent's node_check part (module node_check's arguments) installs the node check in the same call: the
    code, the launcher, its configuration and units, once; a tree (root other than /) leaves systemd alone."""
    root = tmp_path / "root"
    root.mkdir()
    # As an inventory may write it: the list as one string, the number as a string (the module's own types).
    intent = {**INTENT, "roles": {**INTENT["roles"], "node_check": {"interval": "60", "skip": "port.rate, drift.nccl"}}}
    first = run_module(tmp_path, root=str(root), intent=intent)
    assert first["changed"] is True and first["node_check"]["unit"] == "gpucluster-fabric-check.timer"
    library = root / "usr/local/lib/gpucluster-fabric/gpucluster_fabric_check"
    assert (library / "node_check.py").is_file() and (library / "fabric_checks" / "health.py").is_file()
    assert (os.stat(root / "usr/local/sbin/gpucluster-fabric-check").st_mode & 0o777) == 0o755
    assert json.loads((root / "etc/gpucluster/fabric-check.json").read_text())["skip"] == ["port.rate", "drift.nccl"]
    assert "OnUnitActiveSec=60" in (root / "etc/systemd/system/gpucluster-fabric-check.timer").read_text()
    assert run_module(tmp_path, root=str(root), intent=intent)["changed"] is False
    bad = {**INTENT, "roles": {"node_check": {"interval": 0}}}
    refused = run_module(tmp_path, root=str(root), intent=bad)
    assert refused["failed"] is True and "gpu1: node_check_interval=0 is not a number of seconds" in refused["msg"]
    assert json.loads((root / FILE).read_text())["roles"]["node_check"] == intent["roles"]["node_check"]


def test_release_hold_ends_the_converges_hold_once_the_intent_is_written_not_in_check_mode(tmp_path):
    root = tmp_path / "root"
    hold = root / "run/gpucluster-fabric-check.hold"
    hold.parent.mkdir(parents=True)
    hold.write_text('{"until": 4102444800, "by": "site.yml"}\n')
    predicted = run_module(tmp_path, check=True, root=str(root), intent=INTENT, release_hold=True)
    assert predicted["changed"] is True and hold.exists()  # check mode: the hold stays
    assert run_module(tmp_path, root=str(root), intent=INTENT)["changed"] is True and hold.exists()  # not asked
    hold.write_text("{}")
    refused = run_module(tmp_path, root=str(root), intent={"schema": 1}, release_hold=True)
    assert refused["failed"] is True and hold.exists()  # an intent refused ends nothing
    released = run_module(tmp_path, root=str(root), intent=INTENT, release_hold=True)
    assert released["changed"] is False and not hold.exists()  # the end of a hold is not a change
    assert run_module(tmp_path, root=str(root), intent=INTENT, release_hold=True)["changed"] is False  # none: fine
