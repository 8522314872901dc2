"""Verify role opensm on real OpenSM over the ibsim fabric built from the scenario inventory (testinfra).

The expected memberships below are written out by hand from molecule.yml (not computed with the role's code), so a
rendering bug cannot hide itself. Phase 1 is after converge; phase 2 after side_effect.yml changed the membership.
"""

import re
import shlex

import pytest

# Only the SM container is a real host; the other inventory hosts exist only as HCAs in the simulated fabric.
testinfra_hosts = ["subnet_managers"]

UNIT = "opensm@0x0002c90300000001.service"
SM_GUID = "0x0002c90300000001"
SM_KEY = "0x00000000000b0b01"
# OpenSM checks the key in an SA MAD's header (saquery --smkey) against its sa_key, not its sm_key.
SA_KEY = "0x00000000000b0b02"
ENV = "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so SIM_HOST=H-0002c90300000001"
DEFAULT, TRAINING, STORAGE = 0x7FFF, 0x0101, 0x0200

GPU_PHASE1 = {DEFAULT: "limited", TRAINING: "full", STORAGE: "limited"}
GPU_PHASE2 = {DEFAULT: "limited", TRAINING: "full"}
STORAGE01 = {DEFAULT: "full", TRAINING: "limited", STORAGE: "both"}
ONLY_DEFAULT_LIMITED = {DEFAULT: "limited"}

EXPECTED = {
    1: {
        "0x0002c90300000001": {DEFAULT: "full"},  # the SM's own port (SELF=full)
        "0x0002c90300001001": GPU_PHASE1,
        "0x0002c90300001002": GPU_PHASE1,
        "0x0002c90300001101": GPU_PHASE1,
        "0x0002c90300001102": GPU_PHASE1,
        "0x0002c90300001201": ONLY_DEFAULT_LIMITED,  # gpu03: in no partition yet
        "0x0002c90300002001": STORAGE01,
        "0x0002c90300003001": ONLY_DEFAULT_LIMITED,  # login01: never a member
    },
    2: {
        "0x0002c90300000001": {DEFAULT: "full"},
        "0x0002c90300001001": GPU_PHASE2,
        "0x0002c90300001002": GPU_PHASE2,
        "0x0002c90300001101": GPU_PHASE2,
        "0x0002c90300001102": GPU_PHASE2,
        "0x0002c90300001201": {DEFAULT: "limited", TRAINING: "full"},
        "0x0002c90300002001": STORAGE01,
        "0x0002c90300003001": ONLY_DEFAULT_LIMITED,
    },
}


def sim(host, command):
    return host.check_output(f"{ENV} {command}")


@pytest.fixture(scope="module")
def phase(host):
    """1 after converge; 2 after side_effect.yml (it writes /root/lab/phase)."""
    marker = host.file("/root/lab/phase")
    return int(marker.content_string.strip()) if marker.exists else 1


def memberships(raw_keys):
    """P_Key table entries -> {low 15 bits: full|limited|both}."""
    found = {}
    for key in raw_keys:
        if key & 0x7FFF == 0:
            continue
        kind = "full" if key & 0x8000 else "limited"
        previous = found.get(key & 0x7FFF)
        found[key & 0x7FFF] = "both" if previous and previous != kind else kind
    return found


def table_values(text):
    return [int(value, 16) for value in re.findall(r"0x[0-9a-fA-F]{4}\b", text)]


# One remote command collects everything (each testinfra command through Ansible costs seconds): the CA ports with
# their LIDs from `ibnetdiscover -p` (SMPs), then per LID the P_Key table read from the port (`smpquery pkeys`) and
# the SA's PKeyTableRecord (`saquery PKTR`, a trusted query that needs the configured SA key). The key is read from
# opensm.conf on the host: a key on the command line would reach the journal through Ansible's module log.
COLLECT = f"""
set -u
export {ENV}
sa_key=$(awk '$1 == "sa_key" {{print $2}}' /etc/opensm/opensm.conf)
ibnetdiscover -p | grep '^CA' | while read -r _ lid _ guid _; do
  echo "@@port $guid $lid"
  echo "@@smp"; smpquery pkeys "$lid"
  echo "@@sa"; saquery -t 5000 --smkey "$sa_key" PKTR "$lid"
done
"""


@pytest.fixture(scope="module")
def fabric(host):
    """{port GUID: {"lid": int, "smp": {pkey: membership}, "sa": {pkey: membership}}}"""
    out = host.check_output(f"bash -c {shlex.quote(COLLECT)}")
    ports = {}
    for chunk in out.split("@@port ")[1:]:
        head, rest = chunk.split("\n", 1)
        guid, lid = head.split()
        smp_text, sa_text = rest.split("@@smp", 1)[1].split("@@sa", 1)
        smp_rows = "\n".join(line for line in smp_text.splitlines() if re.match(r"^\s*\d+:", line))
        blocks = [b for b in sa_text.split("PKeyTableRecord dump:") if "Block......................0" in b]
        ports[f"0x{int(guid, 16):016x}"] = {
            "lid": int(lid),
            "smp": memberships(table_values(smp_rows)),
            "sa": memberships(table_values(blocks[0].split("PKey Table:")[1])) if blocks else None,
            "raw": rest,
        }
    return ports


def test_ibsim_and_opensm_running(host):
    assert host.service("ibsim.service").is_running
    assert host.service(UNIT).is_running


def test_wrapper_unit_is_enabled_and_active(host):
    """Debian's opensm.service starts the SM at boot (PORTS in /etc/default/opensm) and reports it now."""
    wrapper = host.service("opensm.service")
    assert wrapper.is_enabled
    assert wrapper.is_running, host.run("systemctl status --no-pager opensm.service").stdout


def test_sm_is_master_on_bound_port(host):
    out = sim(host, "sminfo")
    assert "SMINFO_MASTER" in out, out
    assert "sm guid 0x2c90300000001" in out, out
    assert "priority 14" in out, out


def test_opensm_conf_is_private_and_complete(host):
    conf = host.file("/etc/opensm/opensm.conf")
    assert conf.user == "root" and conf.mode == 0o600
    text = conf.content_string
    for line in (
        f"guid {SM_GUID}",
        "sm_priority 14",
        "routing_engine ftree,updn",
        "partition_config_file /etc/opensm/partitions.conf",
        "allow_both_pkeys TRUE",
        "m_key 0x00000000c0ffee01",
        "m_key_protection_level 1",
        "m_key_lease_period 60",
        f"sm_key {SM_KEY}",
        f"sa_key {SA_KEY}",
    ):
        assert line in text.splitlines(), line


def test_partitions_conf_starts_with_explicit_default(host):
    lines = [line for line in host.file("/etc/opensm/partitions.conf").content_string.splitlines() if line.strip()]
    first = next(line for line in lines if not line.startswith("#"))
    assert first == "Default=0x7fff, ipoib, mtu=5 :"


def test_default_file_binds_port(host):
    assert f'PORTS="{SM_GUID}"' in host.file("/etc/default/opensm").content_string


def test_every_inventory_port_is_on_the_fabric(fabric):
    assert set(fabric) == set(EXPECTED[1])


@pytest.mark.parametrize("guid", sorted(EXPECTED[1]))
def test_port_pkeys_via_smp(phase, fabric, guid):
    """smpquery reads the P_Key table from the port itself: the SM programmed exactly the expected memberships."""
    assert fabric[guid]["smp"] == EXPECTED[phase][guid], fabric[guid]["raw"]


@pytest.mark.parametrize("guid", sorted(EXPECTED[1]))
def test_port_pkeys_via_sa(phase, fabric, guid):
    """The SA's PKeyTableRecord agrees with the port."""
    assert fabric[guid]["sa"] == EXPECTED[phase][guid], fabric[guid]["raw"]


def test_sa_ignores_pkey_queries_with_the_default_key(host, fabric):
    """OpenSM's default SA key (0x1) no longer works: the configured sa_key is in force."""
    result = host.run(f"{ENV} saquery -t 1000 --smkey 0x1 PKTR {fabric[SM_GUID]['lid']}")
    assert result.rc != 0 and "PKeyTableRecord dump" not in result.stdout, result


def test_membership_change_kept_the_sm_master_and_running(host, phase):
    if phase != 2:
        pytest.skip("phase 1: side_effect.yml has not changed the membership yet")
    lab = "/root/lab/"
    before = host.file(lab + "pid-before").content_string.strip()
    after = host.file(lab + "pid-after").content_string.strip()
    assert before == after and int(before) > 0, (before, after)
    assert "SMINFO_MASTER" in host.file(lab + "sminfo-before").content_string
    assert "SMINFO_MASTER" in host.file(lab + "sminfo-after").content_string
    samples = [line for line in host.file(lab + "sminfo-samples").content_string.splitlines() if line.strip()]
    assert len(samples) >= 5, samples
    assert all("SMINFO_MASTER" in line for line in samples), [s for s in samples if "SMINFO_MASTER" not in s]
    # the opensm.conf change of the same run was not applied by a restart nobody allowed, but reported
    assert host.file(lab + "restart-required").content_string.strip() == "True"
    assert "sweep_interval 15" in host.file("/etc/opensm/opensm.conf").content_string.splitlines()


# --- keys stay out of the journal and out of readable logs ---------------------------------------------------------

M_KEY = "0x00000000c0ffee01"
KEYS = {"m_key": M_KEY, "sm_key": SM_KEY, "sa_key": SA_KEY}


def key_patterns():
    """grep -E patterns for the key values that do not contain the values themselves ("c0ffee0[1]"): the check's own
    command line reaches the journal through Ansible's module log and must not match itself."""
    return " ".join(f"-e '{value[2:-1]}[{value[-1]}]'" for value in KEYS.values())


def test_opensm_prints_its_options_to_the_journal_with_keys_hidden(host):
    """The journal still gets OpenSM's output (its option dump included), with the key values replaced."""
    out = host.check_output(f"journalctl --no-pager -o cat -u {UNIT}")
    assert "Loading Cached Option:sm_priority = 14" in out, out[-3000:]
    for name in KEYS:
        assert f"Loading Cached Option:{name} = <hidden>" in out, out[-3000:]


def test_no_key_value_in_the_journal_of_opensm(host):
    """Every journal entry of the SM units, and any entry from an opensm process or with OpenSM's syslog tag."""
    command = (
        f"{{ journalctl --no-pager -o verbose -u 'opensm*'; journalctl --no-pager -o verbose _COMM=opensm; "
        f"journalctl --no-pager -o verbose SYSLOG_IDENTIFIER=OpenSM; }} | grep -i -E {key_patterns()}"
    )
    result = host.run(command)
    assert result.rc == 1 and result.stdout == "", result.stdout[-3000:]


def test_no_key_value_in_a_log_others_can_read(host):
    """A query with a wrong SA key makes OpenSM log the configured one (ERR 1A04): its log must be root-only, and no
    file under /var/log, /var/cache/opensm or /var/tmp (the lab's OSM_TMP_DIR) that group or others can read may hold
    a key (the binary journal files are judged by the test above)."""
    host.run(f"{ENV} saquery -t 1000 --smkey 0x1 PKTR 1")
    log = host.file(f"/var/log/opensm.{SM_GUID}.log")
    assert log.exists and log.user == "root" and log.mode & 0o077 == 0, oct(log.mode)
    readable = (
        "find /var/log /var/cache/opensm /var/tmp -path /var/log/journal -prune -o -type f -perm /044 -print0 "
        f"| xargs -0 -r grep -l -i -E {key_patterns()}"
    )
    result = host.run(readable)
    assert result.stdout == "", result.stdout
