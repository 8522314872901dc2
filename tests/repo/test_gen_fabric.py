"""tests/lab/ibsim/gen_fabric.py: the net file carries the inventory's port GUIDs in ibsim's conventions."""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gen_fabric", ROOT / "tests" / "lab" / "ibsim" / "gen_fabric.py")
gen_fabric = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_fabric)

HOSTVARS = (
    '{"sm1": ["0x0002c903000a1b2c"], "gpu1": {"fabric_port_guids": ["0002:C903:000A:1B2E", "0x0002c903000a1b40"]}}'
)


def generate(tmp_path, *extra, hostvars=HOSTVARS):
    source = tmp_path / "hv.json"
    source.write_text(hostvars)
    out = tmp_path / "net"
    gen_fabric.main(["--hostvars-json", str(source), "-o", str(out), *extra])
    return out.read_text()


def test_hca_records_use_ibsim_port_guid_convention(tmp_path):
    text = generate(tmp_path)
    # ibsim gives port 1 the GUID caguid + 1: caguid is written as port GUID - 1
    assert 'caguid=0x0002c903000a1b2b\nCa\t1 "H-0002c903000a1b2c"\t\t# "sm1 mlx5_0"' in text
    assert '# "gpu1 mlx5_1"' in text and "caguid=0x0002c903000a1b3f" in text


def test_two_level_fat_tree_wiring(tmp_path):
    text = generate(tmp_path, "--hcas-per-leaf", "2", "--spines", "3")
    switches = re.findall(r'^Switch\t(\d+) "(S-[0-9a-f]+)"\t\t# "(\w+)"', text, re.M)
    spines = [s for s in switches if s[2].startswith("spine")]
    leaves = [s for s in switches if s[2].startswith("leaf")]
    assert len(spines) == 3 and len(leaves) == 2  # at least two leaves, even for 3 HCAs
    assert all(int(ports) == 2 + 3 for ports, _, _ in leaves)
    assert all(int(ports) == 2 for ports, _, _ in spines)
    for _, spine_id, _ in spines:  # every leaf reaches every spine
        assert text.count(f'"{spine_id}"[') == 2  # one uplink from each of the 2 leaves


def test_invalid_inventory_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="also listed by host"):
        generate(tmp_path, hostvars='{"a": ["0x0002c903000a1b2c"], "b": ["0002:c903:000a:1b2c"]}')


def test_ibsim_node_limit_is_enforced(tmp_path):
    with pytest.raises(SystemExit, match="exceed ibsim's default limits"):
        gen_fabric.main(["--synthetic", "2100", "--hcas-per-leaf", "36", "--spines", "18", "-o", str(tmp_path / "n")])


def test_switch_guid_clash_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="clash"):
        generate(tmp_path, "--switch-guid-base", "0x0002c903000a1b2b")
