"""role opensm: every key opensm.conf.j2 writes is a key OpenSM knows (checked against a real `opensm -c` dump)."""

import re
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
