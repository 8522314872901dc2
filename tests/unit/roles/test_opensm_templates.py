"""role opensm: every key opensm.conf.j2 writes is a key OpenSM knows (checked against a real `opensm -c` dump)."""

import re
import shlex
import subprocess
from pathlib import Path

import jinja2
import pytest

ROOT = Path(__file__).resolve().parents[3]
TEMPLATES = ROOT / "roles" / "opensm" / "templates"
DUMP = ROOT / "tests" / "fixtures" / "opensm" / "opensm-3.3.23-dash-c.conf"  # `opensm -c` from Debian 12's opensm


def known_keys():
    keys = set()
    for line in DUMP.read_text().splitlines():
        match = re.match(r"^([a-z][a-z0-9_]*)\s", line)
        if match:
            keys.add(match.group(1))
    return keys


def render(name, **variables):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), keep_trailing_newline=True)
    env.filters["comment"] = lambda text: "#\n# " + text + "\n#"
    env.filters["split"] = lambda text, sep: text.split(sep)
    env.filters["bool"] = lambda value: value if isinstance(value, bool) else str(value).lower() in ("true", "1", "yes")
    base = {
        "ansible_managed": "Ansible managed",
        "__opensm_bound_guid": "0x0002c903000a1b2c",
        "__opensm_partitions_file": "/etc/opensm/partitions.conf",
        "__opensm_allow_both_pkeys": True,
        "opensm_sm_priority": 14,
        "opensm_routing_engine": "ftree, updn",
        "opensm_sweep_interval": 10,
        "opensm_part_enforce": "both",
        "opensm_m_key": "0x00000000c0ffee01",
        "opensm_m_key_protection_level": 2,
        "opensm_m_key_lease_period": 60,
        "opensm_sm_key": "0x1234",
        "opensm_sa_key": "0x5678",
        "opensm_extra_options": {"lmc": 0, "qos": True, "max_op_vls": 5},
    }
    base.update(variables)
    return env.get_template(name).render(**base)


def config_lines(text):
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def test_dump_fixture_is_real():
    keys = known_keys()
    assert len(keys) > 150
    assert {"guid", "sm_priority", "m_key", "sa_key", "allow_both_pkeys", "partition_config_file"} <= keys


def test_every_written_key_is_known_to_opensm():
    keys = known_keys()
    for line in config_lines(render("opensm.conf.j2")):
        assert line.split()[0] in keys, line


def test_opensm_conf_values():
    lines = config_lines(render("opensm.conf.j2"))
    assert "routing_engine ftree,updn" in lines
    assert "allow_both_pkeys TRUE" in lines
    assert "qos TRUE" in lines and "lmc 0" in lines
    assert "m_key_protection_level 2" in lines and "sa_key 0x5678" in lines


@pytest.mark.parametrize("key", ["opensm_sm_key", "opensm_sa_key"])
def test_empty_keys_keep_opensm_defaults(key):
    lines = config_lines(render("opensm.conf.j2", **{key: "", "opensm_routing_engine": ""}))
    assert not any(line.startswith(key.replace("opensm_", "") + " ") for line in lines)
    assert not any(line.startswith("routing_engine") for line in lines)


def test_m_key_off_writes_zero_key():
    lines = config_lines(render("opensm.conf.j2", opensm_m_key="", opensm_m_key_protection_level=0))
    assert "m_key 0x0000000000000000" in lines


def test_debian_defaults_file():
    assert 'PORTS="0x0002c903000a1b2c"' in render("default-opensm.j2").splitlines()


# --- the unit drop-in that keeps the keys out of the journal -------------------------------------------------------

DEBIAN_EXEC = "/usr/sbin/opensm --guid %I --log_file /var/log/opensm.%I.log"


def render_dropin(exec_start=DEBIAN_EXEC):
    return render("opensm-unit.conf.j2", __opensm_exec_start=exec_start, __opensm_cache_dir="/var/cache/opensm")


def unit_lines(text):
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_dropin_closes_syslog_and_makes_files_root_only():
    lines = unit_lines(render_dropin())
    assert lines[0] == "[Service]"
    assert "InaccessiblePaths=-/dev/log -/run/systemd/journal/dev-log -/dev/console" in lines
    assert "UMask=0077" in lines
    assert "ExecStartPre=-/bin/sh -c 'chmod go= /var/log/opensm* /var/cache/opensm'" in lines


def test_dropin_keeps_debians_command_line_behind_the_filter():
    lines = unit_lines(render_dropin())
    starts = [line for line in lines if line.startswith("ExecStart=")]
    assert starts[0] == "ExecStart=" and len(starts) == 2
    assert starts[1].startswith(f"ExecStart=/bin/bash -c 'exec {DEBIAN_EXEC} > >(")
    assert "StandardOutput" not in "\n".join(lines)


def test_dropin_without_a_known_command_line_drops_stdout():
    lines = unit_lines(render_dropin(exec_start=""))
    assert "StandardOutput=null" in lines
    assert not any(line.startswith("ExecStart=") for line in lines)


OPENSM_START_OUTPUT = """-------------------------------------------------
OpenSM 3.3.23
 Reading Cached Option File: /etc/opensm/opensm.conf
 Loading Cached Option:guid = 0x0002c90300000001
 Loading Cached Option:m_key = 0x00000000c0ffee01
 Loading Cached Option:m_key_protection_level = 1
 Loading Cached Option:m_key_lookup = FALSE
 Loading Cached Option:sm_key = 0x00000000000b0b01
 Loading Cached Option:sa_key = 0x00000000000b0b02
 Loading Cached Option:cc_key = 0x0000000000000abc
 Loading Cached Option:sm_priority = 14
-E- Parsing error in field sa_key, expected numeric input received: 0xb0b0zz
Entering MASTER state
"""


def test_dropin_filter_hides_key_values_and_keeps_every_other_line(tmp_path):
    """Run the drop-in's ExecStart (as systemd splits it) with `cat` of OpenSM's start output in place of opensm."""
    sample = tmp_path / "out.txt"
    sample.write_text(OPENSM_START_OUTPUT)
    start = [line for line in unit_lines(render_dropin(exec_start=f"cat {sample}")) if line.startswith("ExecStart=/")]
    argv = shlex.split(start[0][len("ExecStart=") :])
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout
    expected = []
    for line in OPENSM_START_OUTPUT.splitlines():
        if re.search(r"Option:[a-z_]*key = ", line):
            line = line.split(" = ")[0] + " = <hidden>"
        elif "Parsing error" in line:
            line = line.split("received: ")[0] + "received: <hidden>"
        expected.append(line)
    assert out.splitlines() == expected
    for secret in ("c0ffee01", "b0b01", "b0b02", "abc", "b0b0zz"):
        assert secret not in out
