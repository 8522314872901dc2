"""Module opensm run as Ansible runs it (a separate Python process with its arguments as JSON), on a root tree.

The tree stands for / (files are read and written below it; no unit is asked about there). Reloading and restarting a
real OpenSM on what the module reports is proven by scenario opensm (SIGHUP keeps the PID, a restart only with
opensm_restart_ok) and scenario site.
"""

import os
import stat
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _process  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
KEY = "0x00000000c0ffee01"
ARGS = {
    "unit": "opensm@0x0002c90300a00001.service",
    "directories": ["/etc/opensm", "/etc/systemd/system/opensm@.service.d"],
    "partitions_file": "/etc/opensm/partitions.conf",
    "partitions": "Default=0x7fff, ipoib : ALL=limited, SELF=full ;\n",
    "conf_file": "/etc/opensm/opensm.conf",
    "conf": f"guid 0x0002c90300a00001\nm_key {KEY}\n",
    "defaults_file": "/etc/default/opensm",
    "defaults": 'PORTS="0x0002c90300a00001"\n',
    "dropin_file": "/etc/systemd/system/opensm@.service.d/gpucluster-fabric.conf",
    "dropin": "[Service]\nUMask=0077\n",
    "packages": ["opensm", "infiniband-diags"],
}


def run_module(tmp_path, root, check=False, diff=False, **extra):
    return _process.run_module("opensm", tmp_path, check, diff, **dict(ARGS, root=str(root), **extra))


def test_writes_once_checked_first_and_never_shows_the_keys(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    predicted = run_module(tmp_path, root, check=True, diff=True)
    assert predicted["changed"] is True and list(root.iterdir()) == []
    assert [c["what"] for c in predicted["changes"]] == [
        "/etc/opensm",
        "/etc/systemd/system/opensm@.service.d",
        "/etc/opensm/partitions.conf",
        "/etc/opensm/opensm.conf",
        "/etc/default/opensm",
        "/etc/systemd/system/opensm@.service.d/gpucluster-fabric.conf",
    ]
    (conf_diff,) = [d for d in predicted["diff"] if d["after_header"] == "/etc/opensm/opensm.conf"]
    assert conf_diff == {
        "before_header": "/etc/opensm/opensm.conf",
        "after_header": "/etc/opensm/opensm.conf",
        "before": "",
        "after": "(new content not shown: the file holds keys)\n",
    }
    assert KEY not in str(predicted)
    flags = {key: predicted[key] for key in ("partitions_changed", "config_changed", "dropin_changed", "was_running")}
    assert flags == {"partitions_changed": True, "config_changed": True, "dropin_changed": True, "was_running": False}

    first = run_module(tmp_path, root)
    assert first["changes"] == predicted["changes"] and KEY not in str(first)
    conf = root / "etc/opensm/opensm.conf"
    assert conf.read_text() == ARGS["conf"] and stat.S_IMODE(conf.stat().st_mode) == 0o600
    assert stat.S_IMODE((root / "etc/opensm/partitions.conf").stat().st_mode) == 0o644
    assert stat.S_IMODE((root / "etc/opensm").stat().st_mode) == 0o755

    again = run_module(tmp_path, root)
    assert again["changed"] is False and again["changes"] == []
    assert not (again["partitions_changed"] or again["config_changed"] or again["dropin_changed"])


def test_each_kind_of_change_says_what_the_running_sm_must_do(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    run_module(tmp_path, root)
    # partitions only: a SIGHUP, no restart
    members = run_module(tmp_path, root, partitions="Default=0x7fff, ipoib : ALL=full ;\n")
    assert (members["partitions_changed"], members["config_changed"]) == (True, False)
    # a key: a restart (opensm.conf), the diff still hiding both versions
    rekeyed = run_module(
        tmp_path, root, diff=True, partitions="Default=0x7fff, ipoib : ALL=full ;\n", conf="m_key 0x1\n"
    )
    assert (rekeyed["partitions_changed"], rekeyed["config_changed"], rekeyed["dropin_changed"]) == (False, True, False)
    assert [d["before"] for d in rekeyed["diff"]] == ["(old content not shown: the file holds keys)\n"]
    # a mode widened by hand is put back, and reported
    conf = root / "etc/opensm/opensm.conf"
    conf.chmod(0o644)
    fixed = run_module(tmp_path, root, partitions="Default=0x7fff, ipoib : ALL=full ;\n", conf="m_key 0x1\n")
    assert fixed["changes"] == [{"what": "/etc/opensm/opensm.conf", "why": "mode 0600"}]
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600


def test_packages_missing_from_dpkg_status(tmp_path):
    root = tmp_path / "root"
    status = root / "var/lib/dpkg/status"
    status.parent.mkdir(parents=True)
    status.write_text(
        "Package: opensm\nStatus: install ok installed\nVersion: 3.3.24-1\n\n"
        "Package: infiniband-diags\nStatus: deinstall ok config-files\nVersion: 44.0-2\n"
    )
    result = run_module(tmp_path, root, state="checked")
    assert result["packages_missing"] == ["infiniband-diags"] and result["apt_indexes"] is False
    assert result["changed"] is False and not (root / "etc").exists()
