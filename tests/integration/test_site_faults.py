"""Fault tests: playbooks/site.yml on the lab of Molecule scenario `site` when things go wrong.

Molecule scenario `site` (molecule/site) runs these with ansible-playbook against its own real systemd containers
(the lab of tests/lab/playbooks/lab_up.yml: ibsim + OpenSM on the SM, the lab CUDA mirror, veth fabric interfaces),
from two side_effect steps of its test sequence (molecule/site/faults.yml):

- after `check`, on the fresh lab: a converge interrupted half-way (SIGINT to ansible-playbook, as Ctrl-C) stops
  cleanly. The re-run is the scenario's next step, `converge`, which must complete.
- after `verify`, on the converged lab:
  1. a bad inventory value fails in the preflight play, before any host changes (hosts compared before/after);
  2. a stopped subnet manager fails validation (playbooks/validate.yml) with a clear message, though the ports it
     configured stay ACTIVE, and its own node check shows it in its metrics within one interval;
  3. an unreachable node does not stop the others and is reported (recap and validation report); on the converged
     lab this run is also the scenario's no-op re-run: nothing may change on the hosts it reaches;
  4. the node check (role node_check, on a timer every node_check_interval seconds, and Slurm's HealthCheckProgram)
     shows a fault in the node's metrics, scraped from its node_exporter, and Slurm drains the node with the check in
     its reason (`sinfo -R`) after its hysteresis; the repair resumes it the same way: the fabric MTU set with
     `ip link`, nccl.conf edited. The fleet drift check (playbooks/check.yml) fails that node on those checks alone.
     A node an operator set DOWN, or drained with a reason like the check's, stays as the operator left it. The
     same fault on every GPU node drains one, as the breaker allows; a hung tool is a failed check naming it, and a
     hung scontrol leaves Slurm as it is; a site.yml run that changes every GPU node drains none. partitions.conf
     edited on the subnet manager shows in its metrics, and once OpenSM applies it, every port that gained a P_Key
     fails its isolation check, read back from the fabric (smpquery pkeys);
  5. the CUDA mirror going away mid-run (a blackhole rule for the mirror's TCP port on one node once the nccl role
     starts an NCCL change; only that port: the controller's SSH sessions come from the same address)
     fails clearly, and leaves that node consistent (dpkg clean, NCCL still the old version, pinned and held).

The scenario passes the lab in the environment: FAULT_LAB_GPUS, FAULT_LAB_SMS (host names, comma-separated),
FAULT_LAB_HOST_VARS (the scenario's host_vars directory), LAB_SUITE and LAB_REPORT_DIR.
"""

import difflib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SUITE = os.environ.get("LAB_SUITE", "bookworm")
GPUS = [name for name in os.environ.get("FAULT_LAB_GPUS", "").split(",") if name]
SMS = [name for name in os.environ.get("FAULT_LAB_SMS", "").split(",") if name]
HOST_VARS = Path(os.environ.get("FAULT_LAB_HOST_VARS", ROOT / "molecule" / "site" / "host_vars"))
ANSIBLE_PLAYBOOK = str(Path(sys.executable).with_name("ansible-playbook"))

pytestmark = pytest.mark.skipif(
    os.environ.get("GPUCLUSTER_FAULT_TESTS") != "1",
    reason="needs the lab of Molecule scenario site: run `molecule test -s site` (make site-tests)",
)
if os.environ.get("GPUCLUSTER_FAULT_TESTS") == "1" and (len(GPUS) < 2 or not SMS):
    raise RuntimeError("GPUCLUSTER_FAULT_TESTS=1 needs FAULT_LAB_GPUS (two or more) and FAULT_LAB_SMS")


def _inventory(directory, host_vars_extra=None):
    """An inventory of the scenario's hosts, with their host_vars, plus `host_vars_extra` ({host: {var: value}})."""

    def hosts(names):
        return {
            name: {**yaml.safe_load((HOST_VARS / f"{name}.yml").read_text()), **(host_vars_extra or {}).get(name, {})}
            for name in names
        }

    inventory = {"all": {"children": {"gpu_nodes": {"hosts": hosts(GPUS)}, "subnet_managers": {"hosts": hosts(SMS)}}}}
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "hosts.yml").write_text(json.dumps(inventory, indent=1))
    link = directory / "group_vars"
    if not link.exists():
        link.symlink_to(ROOT / "inventories" / "lab" / "group_vars")
    return str(directory)


def _env(report_dir):
    return dict(os.environ, LAB_SUITE=SUITE, LAB_REPORT_DIR=str(report_dir), ANSIBLE_FORCE_COLOR="0")


def _playbook(inventory, playbook, report_dir, *extra):
    """ansible-playbook with stderr merged into stdout: Molecule's ansible.cfg (display_failed_stderr) sends the
    failed tasks' messages to stderr, and the tests read them in order with the rest."""
    proc = subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", inventory, playbook, *extra],
        cwd=ROOT,
        env=_env(report_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    return proc


def _recap(output):
    """{host: {ok, changed, unreachable, failed, ...}} from the PLAY RECAP."""
    recap = {}
    for line in output.split("PLAY RECAP")[-1].splitlines():
        match = re.match(r"^(\S+)\s+:\s+(.*)$", line.strip())
        if match:
            recap[match.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", match.group(2))}
    return recap


def _podman(*args, check=True):
    return subprocess.run(["podman", *args], capture_output=True, text=True, check=check)


def _wait_for_ssh(host, timeout=120):
    """Until `host` answers on SSH port 22 at its management address (its sshd is up again)."""
    address = yaml.safe_load((HOST_VARS / f"{host}.yml").read_text())["lab_mgmt_address"]
    deadline = time.time() + timeout
    while True:
        try:
            with socket.create_connection((address, 22), timeout=2) as sock:
                if sock.recv(64).startswith(b"SSH-"):
                    return
        except OSError:
            pass
        if time.time() > deadline:
            raise AssertionError(f"{host} ({address}) did not answer on SSH within {timeout} s")
        time.sleep(1)


def _state(host):
    """What a run could change on a host: packages and their states, holds, /etc, the fabric interface, and what a
    preflight may leave in /tmp (cuda_repo's downloads must be removed when the preflight fails)."""
    script = (
        "dpkg-query -W -f='${Package} ${Version} ${Status}\\n' | sort; apt-mark showhold; ls -d /tmp/cuda_repo.* 2>&1;"
        " find /etc -xdev -type f -print0 | sort -z | xargs -0 md5sum; { ip -o link show eth1 | sed 's/ qlen.*//';"
        " ip -o addr show dev eth1; } 2>/dev/null || echo 'no eth1'"
    )
    return _podman("exec", host, "sh", "-c", script).stdout


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("faults")
    report_dir = Path(os.environ.get("LAB_REPORT_DIR") or base / "reports")
    yield {"base": base, "inventory": _inventory(base / "inventory"), "reports": report_dir}
    for host in GPUS:
        _podman("exec", host, "ip", "rule", "del", *_mirror_cut_rule(), check=False)


@pytest.fixture
def paused_node_checks():
    """The node check's timer stopped on every GPU node, and its run in flight let finish, for the length of a test
    that compares the hosts' state before and after a run: the node check's drift.cuda_repo downloads into a
    /tmp/cuda_repo.* directory of its own for the seconds it runs (every 10 s on this lab), which a snapshot taken
    then would count as the run's leftover. Started again after the test."""
    for host in GPUS:
        _podman("exec", host, "systemctl", "stop", "gpucluster-fabric-check.timer")
        _podman(
            "exec",
            host,
            "sh",
            "-c",
            "i=0; while systemctl is-active --quiet gpucluster-fabric-check.service && [ $i -lt 120 ]; do"
            " sleep 1; i=$((i+1)); done",
        )
    yield
    for host in GPUS:
        _podman("exec", host, "systemctl", "start", "gpucluster-fabric-check.timer", check=False)


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        (
            {"fabric_interfaces": [{"name": "eth1", "kind": "ipoib", "mode": "datagram", "mtu": 9000}]},
            ["fabric_interfaces", "4092"],
        ),
        # Two roles' problems on one host, reported together: a GUID and a ToS whose DSCP no PFC priority carries.
        (
            {"fabric_port_guids": ["0x0002c90300c0020Z"], "roce_qos_tos": 130},
            ["fabric_port_guids", "roce_qos_tos=130 marks DSCP 32, which roce_qos_dscp_map does not map"],
        ),
        ({"nccl_versoin": "2.21.5-1+cuda12.4"}, ["nccl_versoin: did you mean nccl_version?"]),
    ],
    ids=["mtu-9000-datagram-ipoib", "malformed-guid", "misspelled-variable"],
)
def test_bad_inventory_fails_in_preflight_before_any_change(lab, request, paused_node_checks, bad, expected):
    """One GPU node's bad value stops every host in the preflight play; the message names host and variable."""
    host = GPUS[1]
    expected = [host, *expected]
    inventory = _inventory(lab["base"] / f"bad-{request.node.callspec.id}", {host: bad})
    before = {host: _state(host) for host in [*GPUS, *SMS]}
    proc = _playbook(inventory, "playbooks/site.yml", lab["reports"])
    output = proc.stdout
    assert proc.returncode != 0, output[-4000:]
    preflight = output.split("PLAY [Provision the RDMA user space")[0]
    assert "PLAY [Check the inventory before any host changes]" in preflight
    for word in expected:
        assert word in preflight, (word, output[-4000:])
    assert all(counts.get("changed", 0) == 0 for counts in _recap(output).values()), output[-3000:]
    for host in [*GPUS, *SMS]:
        after = _state(host)
        changed = "".join(difflib.unified_diff(before[host].splitlines(True), after.splitlines(True), n=0))
        assert after == before[host], f"{host} changed although the preflight failed:\n{changed}"


def _run_interrupted(inventory, report_dir, marker, timeout=1800):
    """Start site.yml, send SIGINT (Ctrl-C) once `marker` appears in its output; return the output."""
    proc = subprocess.Popen(
        [ANSIBLE_PLAYBOOK, "-i", inventory, "playbooks/site.yml"],
        cwd=ROOT,
        env=_env(report_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    deadline = time.time() + timeout
    interrupted = False
    for line in proc.stdout:
        lines.append(line)
        if not interrupted and marker in line:
            # Ctrl-C: Ansible stops at the running task; a second SIGINT would abort harder, as a user might.
            time.sleep(2)
            proc.send_signal(signal.SIGINT)
            interrupted = True
        if time.time() > deadline:
            proc.kill()
            break
    proc.wait(timeout=300)
    return interrupted, proc.returncode, "".join(lines)


def test_interrupted_converge_stops_cleanly(lab):
    """Ctrl-C half-way through the first converge. The re-run is the scenario's next step, `converge`."""
    interrupted, returncode, output = _run_interrupted(
        lab["inventory"], lab["reports"], "TASK [gpucluster.fabric.rdma_core : Install"
    )
    assert interrupted, output[-3000:]
    assert returncode != 0
    assert "PLAY [Validate the fabric]" not in output
    # Half-way: the preflight passed and the first role started on the GPU nodes.
    assert "PLAY [Check the inventory before any host changes]" in output
    assert "PLAY RECAP" in output or "User interrupted execution" in output, output[-3000:]


UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"


def _sm_is_master(sm):
    """Whether sminfo on the subnet manager (attached as its own simulated HCA) reaches a master SM."""
    guid = yaml.safe_load((HOST_VARS / f"{sm}.yml").read_text())["fabric_port_guids"][0]
    sim_host = "H-" + guid.lower().removeprefix("0x")
    env = ["env", f"LD_PRELOAD={UMAD2SIM}", f"SIM_HOST={sim_host}"]
    out = _podman("exec", "-w", "/root", sm, *env, "timeout", "15", "sminfo", check=False).stdout
    return "SMINFO_MASTER" in out


def test_stopped_subnet_manager_fails_validation_clearly(lab):
    """OpenSM stopped (`systemctl stop opensm` on the SM): the ports stay ACTIVE with their SM LID from the last
    sweep, so only check sm.master sees it; validation alone (playbooks/validate.yml, one GPU node) must fail on it
    and say what to look at. OpenSM is started again afterwards and the next tests' validation passes on it."""
    sm, node = SMS[0], GPUS[0]
    _wait_for_checks(sm, {"opensm.running": "passed", "sm.master": "passed"}, time.time() - _node_check_interval())
    _podman("exec", sm, "systemctl", "stop", "opensm")
    stopped = time.time()
    try:
        # The subnet manager's own check shows it in its metrics within one interval.
        _wait_for_checks(sm, {"opensm.running": "failed", "sm.master": "failed"}, stopped)
        runs_before = {p.name for p in lab["reports"].iterdir()} if lab["reports"].exists() else set()
        proc = _playbook(lab["inventory"], "playbooks/validate.yml", lab["reports"], "--limit", node)
        output = proc.stdout
        assert proc.returncode == 2, output[-4000:]  # 2: a host failed
        failure = output[output.index(f"fatal: [{node}]") :][:3000]
        assert f"{node}: health/sm.master[" in failure, failure
        assert "no subnet manager answers at SM LID" in failure and "is OpenSM running?" in failure, failure
        new_runs = sorted({p.name for p in lab["reports"].iterdir()} - runs_before)
        checks = json.loads((lab["reports"] / new_runs[-1] / "report.json").read_text())["checks"]
        failed = {(c["host"], c["check"]) for c in checks if c["status"] == "failed"}
        mine = {name for host, name in failed if host == node}
        assert mine and all(name.startswith("sm.master[") for name in mine), checks
        # The subnet manager's own check, which the validation asks for its report, says why: OpenSM is stopped.
        assert {(sm, "opensm.running"), (sm, "sm.state")} <= failed, failed
        # The point of the check: the port checks alone still pass a fabric without a subnet manager.
        states = [c for c in checks if c["check"].startswith("port.state[")]
        assert states and all(c["status"] == "passed" for c in states), states
    finally:
        _podman("exec", sm, "systemctl", "start", "opensm")
        deadline = time.time() + 60
        while not _sm_is_master(sm):
            assert time.time() < deadline, f"no master SM on {sm} 60 s after starting opensm again"
            time.sleep(1)
        _wait_for_checks(sm, {"opensm.running": "passed", "sm.master": "passed"}, time.time())


def _node_check_interval():
    return yaml.safe_load((ROOT / "inventories" / "lab" / "group_vars" / "all.yml").read_text())["node_check_interval"]


def _metrics(host):
    """{(name, labels): value} of the node's node_exporter, scraped over HTTP as Prometheus does."""
    address = yaml.safe_load((HOST_VARS / f"{host}.yml").read_text())["lab_mgmt_address"]
    with urllib.request.urlopen(f"http://{address}:9100/metrics", timeout=10) as response:  # noqa: S310 - lab host
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        match = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$", line)
        if match:
            samples[(match.group(1), match.group(2) or "")] = float(match.group(3))
    return samples


def _check_state(samples, check):
    """The state the node check's last run gave ``check`` in the scraped metrics, or None."""
    for (name, labels), value in samples.items():
        if name == "gpucluster_fabric_check_state" and value == 1 and f'{{check="{check}",' in labels:
            return re.search(r'state="(\w+)"', labels).group(1)
    return None


def _wait_for_checks(host, wanted, after, slack=0):
    """Until the node's metrics come from a run that started after ``after`` and show each check of ``wanted``
    ({check: state, or None where the check is not there}); within one interval of the timer and the run's own time
    (and ``slack`` seconds more). Returns the seconds it took."""
    interval = _node_check_interval()
    deadline = after + interval + 15 + slack
    while True:
        samples = _metrics(host)
        ran = samples.get(("gpucluster_fabric_check_last_run_timestamp_seconds", ""), 0)
        states = {check: _check_state(samples, check) for check in wanted}
        if ran > after and states == wanted:
            assert samples.get(("node_textfile_scrape_error", "")) == 0, "node_exporter could not read the metrics"
            assert samples.get(("gpucluster_fabric_check_up", "")) == 1
            return time.time() - after
        assert time.time() < deadline, f"{host}: after {deadline - after:.0f} s the metrics show {states}, not {wanted}"
        time.sleep(1)


def _slurm_node(node):
    """{state, reason} of the node as Slurm's controller (on the subnet manager) has it."""
    out = _podman("exec", SMS[0], "scontrol", "-o", "show", "node", node).stdout
    state = re.search(r"(?:^|\s)State=(\S+)", out)
    reason = re.search(r"(?:^|\s)Reason=(.*?)(?:\s\[[^\]]*\])?\s*$", out.strip())
    return {"state": state.group(1) if state else "", "reason": reason.group(1) if reason else ""}


def _drained_reasons():
    """{node: reason} of `sinfo -R` (drained, draining, down and failing nodes), as an operator reads it."""
    out = _podman("exec", SMS[0], "sinfo", "-R", "-h", "-o", "%n|%E").stdout
    return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)


def _wait_for_slurm(node, drained, after):
    """Until Slurm has ``node`` drained by the node check (``drained``) or not drained; two intervals (the check's
    hysteresis: two runs in a row that outlast one interval, node_check_slurm_drain_after and _resume_after) and the
    runs' own time. Returns the seconds it took."""
    deadline = after + 2 * _node_check_interval() + 15
    while True:
        reason = _drained_reasons().get(node)
        if (reason or "").startswith("fabric: ") if drained else reason is None:
            return time.time() - after, reason
        assert time.time() < deadline, (
            f"{node}: Slurm has {_slurm_node(node)}, not {'drained' if drained else 'resumed'}"
        )
        time.sleep(1)


def _fleet_check_names(lab, node, failing):
    """The fleet drift check (playbooks/check.yml: each node's own check, once, one task per node) fails ``node`` on
    exactly the checks of ``failing`` and writes the report; every other node passes."""
    runs_before = {p.name for p in lab["reports"].iterdir()} if lab["reports"].exists() else set()
    proc = _playbook(lab["inventory"], "playbooks/check.yml", lab["reports"])
    assert proc.returncode == 2, proc.stdout[-4000:]
    for check in failing:
        assert f"{node}: health/{check} " in proc.stdout, proc.stdout[-4000:]
    run = sorted({p.name for p in lab["reports"].iterdir()} - runs_before)[-1]
    assert {"report.json", "junit.xml", "summary.md"} <= {p.name for p in (lab["reports"] / run).iterdir()}
    checks = json.loads((lab["reports"] / run / "report.json").read_text())["checks"]
    failed = {(c["host"], c["check"]) for c in checks if c["status"] == "failed"}
    assert failed == {(node, check) for check in failing}, failed
    # Every host, and the fleet's own checks (fleet.sm_master: the lab's one subnet manager is MASTER).
    assert {c["host"] for c in checks} == {*GPUS, *SMS, "fleet"}
    assert [c["status"] for c in checks if c["check"] == "fleet.sm_master"] == ["passed"]
    assert _recap(proc.stdout)[node]["failed"] == 1 and all(
        counts.get("changed", 0) == 0 for counts in _recap(proc.stdout).values()
    )


def test_node_check_shows_a_fault_and_its_repair_within_one_interval(lab):
    """Each fault on a converged GPU node, read the way Prometheus and an operator read it: the node's own check puts
    the failed check in the metrics node_exporter serves within one interval, and Slurm drains the node with the check
    as its reason within two (the hysteresis); the repair shows the same way and resumes the node."""
    node = GPUS[0]
    deadline = time.time() + 120
    while "IDLE" not in _slurm_node(node)["state"]:  # slurmd registered, and the node is in service
        assert time.time() < deadline, f"{node} not idle in Slurm: {_slurm_node(node)}"
        time.sleep(2)
    faults = [
        (
            "fabric MTU set by hand",
            "ip link set eth1 mtu 1500",
            "ip link set eth1 mtu 4200",
            {"interface.mtu[eth1]": "failed", "drift.fabric_interfaces": "failed"},
        ),
        (
            "nccl.conf edited",
            "cp -p /etc/nccl.conf /root/nccl.conf.saved && echo NCCL_IB_HCA=mlx5_9 >> /etc/nccl.conf",
            "cp -p /root/nccl.conf.saved /etc/nccl.conf",
            {"drift.nccl": "failed"},
        ),
    ]
    interval = _node_check_interval()
    took = {}
    for name, breaks, repairs, failing in faults:
        passing = dict.fromkeys(failing, "passed")
        _wait_for_checks(node, passing, time.time() - interval)  # the timer runs it, and the node is as intended
        _podman("exec", node, "sh", "-c", breaks)
        try:
            started = time.time()
            took[name] = _wait_for_checks(node, failing, started)
            took[f"{name}, drained"], reason = _wait_for_slurm(node, True, started)
            assert any(f"fabric: {check}" in reason for check in failing), reason
            if name == "fabric MTU set by hand":
                _fleet_check_names(lab, node, failing)
        finally:
            _podman("exec", node, "sh", "-c", repairs)
        started = time.time()
        took[f"{name}, repaired"] = _wait_for_checks(node, passing, started)
        took[f"{name}, resumed"], _reason = _wait_for_slurm(node, False, started)
        assert "DRAIN" not in _slurm_node(node)["state"]
    print(f"node check (interval {interval} s): seconds from each change to what shows it: {took}")


def test_subnet_manager_check_sees_partitions_conf_edited_and_the_fabric_isolation_break(lab):
    """partitions.conf edited by hand on the subnet manager: its own check shows drift.opensm failed within one
    interval (OpenSM reads the file only on SIGHUP or a restart). Once OpenSM applies it (SIGHUP), every port holds
    the new partition's P_Key, which the intent gives none of them: the isolation read back from the fabric
    (smpquery pkeys on each port) fails partition.port for each, naming the P_Key. The file put back and applied
    again, the ports lose the P_Key and every check passes."""
    sm = SMS[0]
    path = "/etc/opensm/partitions.conf"
    guids = [_port_guid(host) for host in (*GPUS, sm)]
    isolated = {f"partition.port[{guid}]": "passed" for guid in guids}
    _wait_for_checks(sm, {"drift.opensm": "passed", **isolated}, time.time() - _node_check_interval())
    _podman(
        "exec", sm, "sh", "-c", f"cp -p {path} /root/partitions.conf.saved && echo 'tenant=0x0202 : ALL;' >> {path}"
    )
    try:
        _wait_for_checks(sm, {"drift.opensm": "failed", **isolated}, time.time())  # the file only, not yet applied
        _podman("exec", sm, "systemctl", "kill", "--signal=HUP", "opensm*.service")
        broken = dict.fromkeys(isolated, "failed")
        _wait_for_checks(sm, {"drift.opensm": "failed", **broken}, time.time())
        report = json.loads(_podman("exec", sm, "cat", "/var/lib/gpucluster/fabric-check.json").stdout)
        failed = {c["check"]: c["message"] for c in report["checks"] if c["status"] == "failed"}
        assert all("holds 0x0202 (limited; no partition has it)" in failed[name] for name in broken), failed
    finally:
        _podman("exec", sm, "cp", "-p", "/root/partitions.conf.saved", path)
        _podman("exec", sm, "systemctl", "kill", "--signal=HUP", "opensm*.service")
    _wait_for_checks(sm, {"drift.opensm": "passed", **isolated}, time.time())


def _port_guid(host):
    """The host's HCA port GUID, as partitions.conf and ibnetdiscover write it."""
    guid = yaml.safe_load((HOST_VARS / f"{host}.yml").read_text())["fabric_port_guids"][0]
    return f"0x{int(guid, 16):016x}"


def test_node_check_leaves_an_operators_down_node_and_fabric_drain_alone(lab):
    """An operator's states are theirs, whether the node's checks fail or pass again: a node an operator set DOWN
    stays DOWN (never drained over, never resumed), and a node an operator drained with a reason that starts like the
    check's own (``fabric: ...``) keeps that drain and reason (the check resumes only drains it remembers setting)."""
    down, drained = GPUS[0], GPUS[1]
    theirs = {down: "operator: cable check", drained: "fabric: operator: cable 12 swapped"}
    _podman("exec", SMS[0], "scontrol", "update", f"nodename={down}", "state=down", f"reason={theirs[down]}")
    _podman("exec", SMS[0], "scontrol", "update", f"nodename={drained}", "state=drain", f"reason={theirs[drained]}")
    try:
        for mtu, state in ((1500, "failed"), (4200, "passed")):
            started = time.time()
            for node in GPUS:
                _podman("exec", node, "ip", "link", "set", "eth1", "mtu", str(mtu))
            for node in GPUS:
                _wait_for_checks(node, {"interface.mtu[eth1]": state}, started)
            time.sleep(_node_check_interval() + 2)  # past the hysteresis, and Slurm's own health check once more
            assert _drained_reasons().get(drained) == theirs[drained], _slurm_node(drained)
            assert "DOWN" in _slurm_node(down)["state"] and _drained_reasons().get(down) == theirs[down]
    finally:
        for node in GPUS:
            _podman("exec", node, "ip", "link", "set", "eth1", "mtu", "4200")
        for node in GPUS:  # an idle node refuses a resume: each is tried
            _podman("exec", SMS[0], "scontrol", "update", f"nodename={node}", "state=resume", check=False)
    started = time.time()
    for node in GPUS:
        _wait_for_slurm(node, False, started)


def test_a_hung_tool_is_a_failed_check_naming_it_and_blocks_no_later_run(lab):
    """A stand-in nvidia-smi that never returns (a GPU gone off the bus hangs the real one): the timer's run stops it
    at the node check's limit for one command, ends well inside its deadline, names it in the metrics, and Slurm drains
    the node for it. Then a scontrol that never returns: the runs end in time, name it, and leave Slurm as it is. With
    the tools answering again, the next run of the timer checks the node as before and the node is resumed. Runs
    queued behind the hung one (the timer's, slurmd's) are never blocked for good."""
    node = GPUS[0]
    check = "tool.timeout[nvidia-smi]"
    _wait_for_checks(node, {check: None}, time.time() - _node_check_interval())
    _podman("exec", node, "sh", "-c", "printf '#!/bin/sh\\nexec sleep 600\\n' >/usr/local/bin/nvidia-smi && "
            "chmod 755 /usr/local/bin/nvidia-smi")  # fmt: skip
    try:
        started = time.time()
        _wait_for_checks(node, {check: "failed"}, started, slack=15)
        samples = _metrics(node)
        assert samples[("gpucluster_fabric_check_duration_seconds", "")] < 40, samples
        _took, reason = _wait_for_slurm(node, True, started)
        # The first failed check names it: gpu.nic_affinity (nvidia-smi timed out), or tool.timeout[nvidia-smi].
        assert reason.startswith("fabric: ") and re.search(r"nvidia-smi.*(timed out|did not answer)", reason), reason
        # nvidia-smi answers again, but now scontrol hangs (a controller that accepts and never answers): the run
        # still ends in time, names scontrol in the metrics, and changes nothing in Slurm.
        _podman("exec", node, "sh", "-c", "mv /usr/local/bin/nvidia-smi /usr/local/bin/scontrol")
        started = time.time()
        _wait_for_checks(node, {check: None, "interface.mtu[eth1]": "passed"}, started, slack=10)
        samples = _metrics(node)
        assert samples.get(("gpucluster_fabric_check_tool_timeout_seconds", '{tool="scontrol"}')) == 5, samples
        assert samples[("gpucluster_fabric_check_duration_seconds", "")] < 40, samples
        assert _drained_reasons().get(node) == reason  # not resumed: the check could not ask Slurm
    finally:
        _podman("exec", node, "rm", "-f", "/usr/local/bin/nvidia-smi", "/usr/local/bin/scontrol")
    started = time.time()
    _wait_for_checks(node, {check: None, "interface.mtu[eth1]": "passed"}, started)
    _wait_for_slurm(node, False, started)


def test_a_check_that_cannot_run_fails_its_unit_says_up_0_and_logs_at_error_priority(lab):
    """An unusable input (the check's configuration holds a JSON string, not a mapping): the run exits 2, which the
    unit counts as a failure (systemctl is-failed), the metrics node_exporter serves say up 0, and the journal has
    the reason at error priority. The configuration back, the next run checks the node again."""
    node = GPUS[0]
    config = "/etc/gpucluster/fabric-check.json"
    _podman("exec", node, "sh", "-c", f"cp -p {config} /root/fabric-check.json.saved && echo '\"x\"' > {config}")
    try:
        run = _podman("exec", node, "systemctl", "start", "gpucluster-fabric-check.service", check=False)
        assert run.returncode != 0, run
        state = _podman("exec", node, "systemctl", "is-failed", "gpucluster-fabric-check.service", check=False)
        assert state.stdout.strip() == "failed", state
        assert _metrics(node)[("gpucluster_fabric_check_up", "")] == 0
        errors = _podman(
            "exec", node, "journalctl", "-u", "gpucluster-fabric-check", "-p", "err", "-n", "5", "-o", "cat"
        )
        assert "fabric: error: config: cannot read " + config in errors.stdout, errors.stdout
    finally:
        _podman("exec", node, "cp", "-p", "/root/fabric-check.json.saved", config)
        _podman("exec", node, "systemctl", "reset-failed", "gpucluster-fabric-check.service", check=False)
    _podman("exec", node, "systemctl", "start", "gpucluster-fabric-check.service")
    assert _metrics(node)[("gpucluster_fabric_check_up", "")] == 1


def test_a_fault_that_comes_and_goes_every_run_changes_nothing_in_slurm(lab):
    """A stand-in nvidia-smi that fails in every other run of the check (a GPU dropping off the bus and coming back):
    the node's runs, the timer's and slurmd's alike, fail and pass in turn, and Slurm never drains the node (sinfo every
    second, over three intervals): the hysteresis wants two failing runs in a row."""
    node = GPUS[0]
    interval = _node_check_interval()
    _wait_for_checks(node, {"gpu.nic_affinity": "skipped"}, time.time() - interval)
    # Each run of the check flips the answer (a run is told by the report the run before it wrote): the calls of one
    # run agree.
    stand_in = """#!/bin/sh
run=/run/nvidia-smi.run; flag=/run/nvidia-smi.failed
this=$(stat -c %Y /var/lib/gpucluster/fabric-check.json)
if [ "$(cat $run 2>/dev/null)" != "$this" ]; then
    echo "$this" >$run
    if [ -e $flag ]; then rm -f $flag; echo passes >>/run/nvidia-smi.runs; else
        touch $flag; echo fails >>/run/nvidia-smi.runs; fi
fi
if [ -e $flag ]; then echo 'Unable to determine the device handle for GPU0000:17:00.0: Unknown Error' >&2; exit 15; fi
echo 'index, name, pci.bus_id, driver_version, memory.total [MiB]'
"""
    subprocess.run(
        [
            "podman",
            "exec",
            "-i",
            node,
            "sh",
            "-c",
            "cat >/usr/local/bin/nvidia-smi && chmod 755 /usr/local/bin/nvidia-smi",
        ],
        input=stand_in,
        text=True,
        check=True,
    )
    seen = []
    try:
        deadline = time.time() + 3 * interval
        while time.time() < deadline:
            seen += [reason for name, reason in _drained_reasons().items() if name == node]
            time.sleep(1)
    finally:
        runs = _podman("exec", node, "cat", "/run/nvidia-smi.runs", check=False).stdout.split()
        _podman("exec", node, "sh", "-c", "rm -f /usr/local/bin/nvidia-smi /run/nvidia-smi.*")
    assert seen == [], seen
    assert runs.count("fails") >= 2 and runs.count("passes") >= 2, runs  # the timer's runs and slurmd's, in turn
    print(f"{node}: runs {' '.join(runs)}: no drain")


def test_the_same_fault_on_every_gpu_node_drains_no_more_than_the_breaker_allows(lab):
    """Every GPU node's fabric MTU set by hand at once, as a shared cause would: the breaker
    (node_check_slurm_max_drained: a tenth of the partition, at least one node) counts the check's drains with Slurm's
    real sinfo, so one node is drained and the other keeps running, its metrics saying the breaker held it; the
    repair resumes the drained one."""
    interval = _node_check_interval()
    for node in GPUS:
        _wait_for_checks(node, {"interface.mtu[eth1]": "passed"}, time.time() - interval)
    for node in GPUS:
        _podman("exec", node, "ip", "link", "set", "eth1", "mtu", "1500")
    try:
        started = time.time()
        for node in GPUS:
            _wait_for_checks(node, {"interface.mtu[eth1]": "failed"}, started)
        time.sleep(3 * interval)  # both have failed long enough to be drained, but for the breaker
        drained = {node: reason for node, reason in _drained_reasons().items() if node in GPUS}
        # The reason names the first check that fails: fabric_interfaces' drift, or the MTU check itself.
        assert len(drained) == 1, drained
        assert all(r.startswith("fabric: ") and "mtu 1500" in r.lower() for r in drained.values()), drained
        (kept,) = set(GPUS) - set(drained)
        assert _metrics(kept).get(("gpucluster_fabric_check_slurm_breaker", "")) == 1
    finally:
        for node in GPUS:
            _podman("exec", node, "ip", "link", "set", "eth1", "mtu", "4200")
    started = time.time()
    for node in GPUS:
        _wait_for_slurm(node, False, started)


def test_a_converge_that_changes_every_gpu_nodes_nccl_conf_drains_none_of_them(lab):
    """site.yml adds an nccl.conf setting on every GPU node, then a second run takes it out again, with the lab's 10-s
    timer running the check throughout: no node is drained at any moment (sinfo, read every second), because the run
    holds each node's check (/run/gpucluster-fabric-check.hold) until the node's new intent is written, and every run
    of the check that saw the node half-changed said it left Slurm alone."""
    import threading

    interval = _node_check_interval()
    for node in GPUS:
        _wait_for_checks(node, {"drift.nccl": "passed"}, time.time() - interval)
    conf = yaml.safe_load((ROOT / "inventories/lab/group_vars/gpu_nodes.yml").read_text())["nccl_conf"]
    changed = _inventory(
        lab["base"] / "inventory-nccl", {n: {"nccl_conf": {**conf, "NCCL_IB_TIMEOUT": 22}} for n in GPUS}
    )
    seen, stop = [], threading.Event()

    def watch():
        while not stop.is_set():
            seen.extend(f"{n}: {r}" for n, r in _drained_reasons().items() if n in GPUS)
            for node in GPUS:  # while a run holds the node, its check also runs every second, as Slurm's might
                _podman("exec", node, "sh", "-c", "! test -f /run/gpucluster-fabric-check.hold || "
                        "systemctl start --no-block gpucluster-fabric-check.service", check=False)  # fmt: skip
            stop.wait(1)

    watcher = threading.Thread(target=watch, daemon=True)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    watcher.start()
    try:
        for inventory in (changed, lab["inventory"]):
            proc = _playbook(inventory, "playbooks/site.yml", lab["reports"])
            assert proc.returncode == 0, proc.stdout[-4000:]
            assert all(_recap(proc.stdout)[node]["changed"] >= 1 for node in GPUS), proc.stdout[-2000:]
        time.sleep(interval + 5)  # and the runs after: each node as its new intent says
    finally:
        stop.set()
        watcher.join()
    assert seen == [], seen
    held = 0
    for node in GPUS:
        journal = _podman("exec", node, "journalctl", "-u", "gpucluster-fabric-check", "--since", started, "-o", "cat")
        half = [line for line in journal.stdout.splitlines() if "failed: drift.nccl" in line]
        assert all("Slurm: left alone while site.yml changes the node" in line for line in half), half
        held += len(half)
        print(f"{node}: {len(half)} run(s) of the check saw nccl.conf half-changed, each held")
    assert held, "no run of the check fell between a node's change and its new intent: the hold was not tried"


def test_unreachable_node_does_not_stop_the_others_and_is_reported(lab):
    lost = GPUS[1]
    _podman("stop", "-t", "2", lost)
    try:
        runs_before = {p.name for p in lab["reports"].iterdir()} if lab["reports"].exists() else set()
        proc = _playbook(
            lab["inventory"], "playbooks/site.yml", lab["reports"], "-e", "gpucluster_max_fail_percentage=50"
        )
        output = proc.stdout
        recap = _recap(output)
        assert proc.returncode == 4, output[-4000:]  # 4: some hosts were unreachable
        assert recap[lost]["unreachable"] >= 1
        for host in (GPUS[0], *SMS):
            assert recap[host]["failed"] == 0 and recap[host]["unreachable"] == 0, output[-4000:]
            # On the converged lab this run is also a no-op re-run for the hosts it reaches.
            assert recap[host]["changed"] == 0, output[-6000:]
        assert "PLAY [Validate the fabric]" in output
        new_runs = sorted({p.name for p in lab["reports"].iterdir()} - runs_before)
        assert new_runs, "no validation report written"
        report = json.loads((lab["reports"] / new_runs[-1] / "report.json").read_text())
        reached = [c for c in report["checks"] if c["host"] == lost and c["check"] == "host.reached"]
        assert reached and reached[0]["status"] == "failed", report["checks"]
        mine = [c for c in report["checks"] if c["host"] == GPUS[0]]
        assert mine and all(c["status"] != "failed" for c in mine), mine
    finally:
        _podman("start", lost)
        # Back as a server: booted, sshd listening. Over SSH a node that is still booting is unreachable (podman
        # exec reached it at once), and the next test needs it.
        _podman("exec", lost, "systemctl", "is-system-running", "--wait", check=False)
        _wait_for_ssh(lost)


def _mirror_endpoint():
    """(address, port) of the lab CUDA mirror, from its manifest (tests/lab/mirror/mirror.sh)."""
    cache = Path(os.environ.get("LAB_MIRROR_CACHE", "/var/tmp/gpucluster-lab-mirror"))
    url = urllib.parse.urlsplit(json.loads((cache / "current.json").read_text())["url"])
    return url.hostname, url.port


def _mirror_cut_rule():
    """An `ip rule` selector and action that drop the node's TCP traffic to the mirror's address and port, and
    nothing else: the node's SSH sessions with the controller pass the same gateway."""
    address, port = _mirror_endpoint()
    return ["to", f"{address}/32", "ipproto", "6", "dport", str(port), "blackhole"]


def test_mirror_gone_mid_run_fails_clearly_and_leaves_host_consistent(lab):
    victim, other = GPUS
    before = _podman("exec", victim, "dpkg-query", "-W", "-f=${Version}", "libnccl2").stdout
    assert before == "2.21.5-1+cuda12.4"
    mirror_address, _ = _mirror_endpoint()
    proc = subprocess.Popen(
        [
            ANSIBLE_PLAYBOOK,
            "-i",
            lab["inventory"],
            "playbooks/site.yml",
            "-e",
            '{"nccl_version": "2.23.4", "nccl_cuda_version": "12.6", "nccl_allow_version_change": true}',
        ],
        cwd=ROOT,
        env=_env(lab["reports"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    cut = False
    for line in proc.stdout:
        lines.append(line)
        if not cut and "TASK [gpucluster.fabric.nccl :" in line:
            _podman("exec", victim, "ip", "rule", "add", *_mirror_cut_rule())
            cut = True
    proc.wait(timeout=300)
    output = "".join(lines)
    try:
        assert cut, output[-3000:]
        assert proc.returncode != 0, output[-4000:]
        recap = _recap(output)
        # The mirror is cut, not the node: the task fails, the connection stays.
        assert recap[victim]["failed"] >= 1 and recap[victim]["unreachable"] == 0, output[-4000:]
        assert recap[other]["failed"] == 0 and recap[other]["unreachable"] == 0, output[-4000:]
        failure = output[output.index(f"fatal: [{victim}]") :][:3000]
        assert "2.23.4" in failure or mirror_address in failure or "mirror" in failure.lower(), failure
        # Consistent: dpkg has nothing half-installed, the old pair is in place and still held.
        assert _podman("exec", victim, "dpkg", "--audit").stdout.strip() == ""
        versions = _podman(
            "exec", victim, "dpkg-query", "-W", "-f=${Package} ${Version} ${Status}\\n", "libnccl2", "libnccl-dev"
        ).stdout
        assert versions.count("2.21.5-1+cuda12.4 hold ok installed") == 2, versions
        pin = _podman("exec", victim, "cat", "/etc/apt/preferences.d/gpucluster-nccl").stdout
        assert "2.21.5-1+cuda12.4" in pin and "2.23.4" not in pin, pin
        holds = _podman("exec", victim, "apt-mark", "showhold").stdout.split()
        assert {"libnccl2", "libnccl-dev"} <= set(holds), holds
        other_version = _podman("exec", other, "dpkg-query", "-W", "-f=${Version}", "libnccl2").stdout
        assert other_version == "2.23.4-1+cuda12.6"
    finally:
        _podman("exec", victim, "ip", "rule", "del", *_mirror_cut_rule(), check=False)


def _step_tags():
    """Every `<role>_<step>` tag of every role's tasks/main.yml (each step's own tag), blocks included."""

    def walk(entries, role):
        for entry in entries or []:
            yield from (tag for tag in entry.get("tags") or [] if tag.startswith(f"{role}_"))
            for key in ("block", "rescue", "always"):
                yield from walk(entry.get(key), role)

    tags = set()
    for main in sorted((ROOT / "roles").glob("*/tasks/main.yml")):
        tags |= set(walk(yaml.safe_load(main.read_text()), main.parent.parent.name))
    return sorted(tags)


def test_every_step_runs_alone_by_its_tag_in_check_mode(lab, paused_node_checks):
    """`--tags <role>_<step> --check` works for every step of every role: a step finds the facts it needs (from a
    step that carries every step's tag), and a dry run changes nothing. One GPU node and the SM; three at a time."""
    tags = _step_tags()
    # The walker must find the steps of the roles that have several (an empty list would test nothing).
    assert len(tags) >= 12 and len({tag.rsplit("_", 1)[0] for tag in tags}) >= 4, tags
    limit = ",".join([GPUS[0], *SMS])
    before = {host: _state(host) for host in [GPUS[0], *SMS]}
    running = {}
    failures = []
    for tag in [*tags, None]:
        while running and (len(running) >= 3 or tag is None):
            for done in [t for t, p in running.items() if p.poll() is not None]:
                proc = running.pop(done)
                output = proc.stdout.read()
                if proc.returncode != 0 or re.search(r"is undefined|FAILED!", output):
                    failures.append(f"--tags {done}: rc {proc.returncode}\n{output[-2500:]}")
            time.sleep(0.5)
        if tag is None:
            break
        running[tag] = subprocess.Popen(
            [
                ANSIBLE_PLAYBOOK,
                "-i",
                lab["inventory"],
                "playbooks/site.yml",
                "--check",
                "--tags",
                tag,
                "--limit",
                limit,
            ],
            cwd=ROOT,
            env=_env(lab["reports"]),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    assert not failures, "\n\n".join(failures)
    for host, state in before.items():
        assert _state(host) == state, f"{host} changed in a check-mode run"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-v"]))
