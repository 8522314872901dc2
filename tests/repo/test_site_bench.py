"""The parts of tests/bench/site_bench.py that decide what is measured: the generated inventory, which changes count
against the no-op re-run, and the baseline's command count."""

import ipaddress
import os
import re
import resource
import subprocess
import sys
import time

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
import site_bench  # noqa: E402


def test_inventory_is_the_lab_shape_with_bench_nodes_and_lab_group_vars(tmp_path):
    inventory = site_bench.write_inventory(str(tmp_path / "inv"), 3)
    with open(os.path.join(inventory, "hosts.yml")) as f:
        tree = yaml.safe_load(f)["all"]
    with open(os.path.join(site_bench.LAB_INVENTORY, "hosts.yml")) as f:
        lab_groups = set(yaml.safe_load(f)["all"]["children"])
    assert set(tree["children"]) == lab_groups
    gpus = tree["children"]["gpu_nodes"]["hosts"]
    sms = tree["children"]["subnet_managers"]["hosts"]
    assert list(gpus) == ["bench-gpu-01", "bench-gpu-02", "bench-gpu-03"]
    assert list(sms) == ["bench-sm-01"]
    hosts = {**gpus, **sms}
    guids = [guid for values in hosts.values() for guid in values["fabric_port_guids"]]
    assert len(set(guids)) == 4 and all(re.fullmatch(r"0x[0-9a-f]{16}", guid) for guid in guids), guids
    addresses = [values["lab_fabric_address"] for values in gpus.values()]
    assert len(set(addresses)) == 3 and all(ipaddress.ip_interface(a).network.prefixlen == 24 for a in addresses)
    assert {values["lab_name"] for values in hosts.values()} == {"bench"}
    managed = [ipaddress.ip_address(values["lab_mgmt_address"]) for values in hosts.values()]
    with open(os.path.join(site_bench.LAB_INVENTORY, "group_vars", "all.yml")) as f:
        subnet = ipaddress.ip_network(yaml.safe_load(f)["lab_mgmt_subnet"])  # the lab management network's
    assert len(set(managed)) == 4 and all(a in subnet for a in managed), managed
    assert os.path.realpath(os.path.join(inventory, "group_vars")) == os.path.realpath(
        os.path.join(site_bench.LAB_INVENTORY, "group_vars")
    )


def test_thirty_two_nodes_get_distinct_guids_and_addresses(tmp_path):
    inventory = site_bench.write_inventory(str(tmp_path / "inv"), 32)
    with open(os.path.join(inventory, "hosts.yml")) as f:
        gpus = yaml.safe_load(f)["all"]["children"]["gpu_nodes"]["hosts"]
    assert len({v["fabric_port_guids"][0] for v in gpus.values()}) == 32
    assert len({v["lab_fabric_address"] for v in gpus.values()}) == 32


def test_podman_inventory_addresses_each_container_by_name(tmp_path):
    inventory = site_bench.write_inventory(str(tmp_path / "inv"), 2, podman=True)
    with open(os.path.join(inventory, "hosts.yml")) as f:
        children = yaml.safe_load(f)["all"]["children"]
    hosts = {**children["gpu_nodes"]["hosts"], **children["subnet_managers"]["hosts"]}
    assert {name: v["ansible_host"] for name, v in hosts.items()} == {name: name for name in hosts}
    plain = site_bench.write_inventory(str(tmp_path / "plain"), 2)
    with open(os.path.join(plain, "hosts.yml")) as f:
        assert "ansible_host" not in f.read()


def test_configurations_set_only_their_own_environment(tmp_path):
    env = {"LAB_SSH_ROOT": "/x", "PATH": "/bin"}
    podman = site_bench.config_env("podman", env, str(tmp_path))
    assert podman["ANSIBLE_TRANSPORT"] == "containers.podman.podman"
    assert site_bench.config_env("pipelining", env, str(tmp_path))["ANSIBLE_PIPELINING"] == "true"
    default = site_bench.config_env("default", env, str(tmp_path))
    assert not {"ANSIBLE_TRANSPORT", "ANSIBLE_PIPELINING"} & set(default)
    assert default["ANSIBLE_SSH_CONTROL_PATH_DIR"] == str(tmp_path / "cp")


def test_leftover_children_are_reaped_and_counted(tmp_path):
    """A daemonised grandchild named ssh (as a ControlPersist master) is re-parented to the benchmark, stopped and
    reaped, its CPU counted; another live one (as a container's monitor) is left alone.

    The grandchild burns a fixed 0.3 s of its own CPU before it says it is ready, so the count does not depend on
    how busy the machine is."""
    ready = tmp_path / "ready"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    script = (
        "import ctypes, os, signal, sys, time\n"
        "if os.fork() == 0:\n"
        "    while time.process_time() < 0.3: pass\n"
        "    ctypes.CDLL(None).prctl(15, b'ssh', 0, 0, 0)\n"
        "    open(sys.argv[1], 'w').close()\n"
        "    signal.pause()\n"
        "if os.fork() == 0:\n"
        "    time.sleep(120)\n"
    )
    site_bench.subreaper(True)
    try:
        subprocess.run([sys.executable, "-c", script, str(ready)], check=True)
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert time.monotonic() < deadline, "the grandchild never burnt its 0.3 CPU s"
            time.sleep(0.05)
        assert site_bench.reap_leftovers() == 1
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        assert (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime) >= 0.29
        left = [pid for pid, (name, _) in site_bench._children().items() if name != "ssh"]
        assert len(left) == 1
    finally:
        site_bench.subreaper(False)
        for pid in site_bench._children():
            os.kill(pid, 9)
            os.waitpid(pid, 0)


def test_changes_on_the_controller_are_told_apart_from_changes_on_nodes():
    delegated = {"ansible_connection": "local", "ansible_host": "localhost"}
    report = {
        "task": {"name": "Write the JSON report"},
        "hosts": {"n1": {"changed": True, "_ansible_delegated_vars": delegated}},
    }
    install = {"task": {"name": "Install packages"}, "hosts": {"n1": {"changed": True}, "n2": {"changed": False}}}
    result = {"plays": [{"tasks": [report, install]}]}
    assert site_bench.changed_tasks(result) == [
        ("n1", "Write the JSON report", True),
        ("n1", "Install packages", False),
    ]


def test_blog_script_command_count():
    # apt install, wget, dpkg -i, apt update && apt install, modprobe x2, ifconfig, ibv_rc_pingpong
    assert site_bench.blog_commands() == 9


def test_task_cpu_callback_writes_a_row_per_task(tmp_path):
    """tests/bench/callback/task_cpu.py, enabled as its docstring says, in a real ansible-playbook run."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        "- name: Two tasks\n  hosts: localhost\n  gather_facts: false\n  tasks:\n"
        '    - name: Burn a little CPU\n      ansible.builtin.set_fact:\n        x: "{{ range(20000) | sum }}"\n'
        "    - name: Say it\n      ansible.builtin.debug:\n        var: x\n"
    )
    log = tmp_path / "task_cpu.log"
    env = dict(
        os.environ,
        ANSIBLE_CALLBACK_PLUGINS=os.path.join(ROOT, "tests", "bench", "callback"),
        ANSIBLE_CALLBACKS_ENABLED="task_cpu",
        GPUCLUSTER_TASK_CPU_LOG=str(log),
    )
    subprocess.run(
        [
            os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
            "-i",
            "localhost,",
            "-c",
            "local",
            str(playbook),
        ],
        check=True,
        capture_output=True,
        env=env,
    )
    header, *rows = log.read_text().splitlines()
    assert re.fullmatch(r"# run: total controller CPU [0-9.]+ s \(before the ssh masters are reaped\)", header)
    names = [row.split(None, 3)[3] for row in rows]
    assert names == ["Two tasks | (play start)", "Two tasks | Burn a little CPU", "Two tasks | Say it"]
    assert all(float(row.split()[0]) >= 0 and int(row.split()[2]) in (0, 1) for row in rows)
