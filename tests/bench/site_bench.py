"""Scale and speed of playbooks/site.yml on the lab, against the blog's shell script (prints a table).

For each node count N (default 1, 4, 16, 32) the benchmark writes a temporary inventory shaped like
inventories/lab/hosts.yml: N GPU nodes bench-gpu-NN in group gpu_nodes and one subnet manager bench-sm-01, each with
its own fabric port GUID (the ibsim fabric is generated from them), the GPU nodes with a fabric address, all on the
management address (lab_mgmt_address) and its lab name `bench` (group_vars is inventories/lab/group_vars itself,
linked: the fabric network gpucluster-bench-fabric, SSH with the bench lab's own keys and known_hosts). It starts them
with tests/lab/playbooks/lab_up.yml, as `make lab` does (ibsim on the SM, the lab CUDA mirror, sshd), and measures:

- site.yml on fresh nodes (converge), then again (the no-op re-run: any changed task fails the benchmark), then the
  fleet drift check (playbooks/check.yml: each node's own check once, one task per node, and the report; it must
  change nothing and pass, and each node's own time is printed), for each Ansible configuration in --configs:
    default      SSH as ansible-core ships it (no ansible.cfg: ssh_args ControlMaster=auto ControlPersist=60s,
                 no pipelining, implicit fact gathering in every play, no cache, 5 forks)
    pipelining   ANSIBLE_PIPELINING=true over the same SSH (what tests/lab/ansible.cfg and docs/ansible.cfg.example
                 set), nothing else changed
    ansiblecfg   docs/ansible.cfg.example as a user copies it (ANSIBLE_CONFIG): pipelining, forks 32,
                 internal_poll_interval 0.05, ControlPersist 300s
    podman       the containers.podman.podman connection (`podman exec`: ANSIBLE_TRANSPORT, and each host's name as
                 its ansible_host in the inventory), which the lab used before it ran sshd; kept for comparison
                 only (it has no pipelining: has_pipelining = False)
    factcache    gathering smart + jsonfile fact cache in a temporary directory (facts gathered once, reused by the
                 re-run)
    mitogen      Mitogen for Ansible (tests/bench/requirements-mitogen.txt, installed under .build/): strategy
                 mitogen_linear over the same SSH (Mitogen's own persistent SSH connections). An opt-in only:
                 ansible-core 2.19 deprecates third-party strategy plugins, the hook Mitogen uses
    mitogen+factcache  both
- the blog's script (tests/bench/blog_setup.sh, the blog's approach, not ours) on fresh nodes, first run and re-run,
  delivered over SSH like pdcp + pdsh would: `scp` of the script, then `ssh <node> bash` on every node at once
  (fan-out 32, one ssh process per node and step, no connection sharing), with the lab's key and known_hosts.

Controller CPU is user+system time of the measured process tree (os.wait4 of ansible-playbook, which includes every
ssh or podman process it reaped; for the baseline the RUSAGE_CHILDREN delta of the scp/ssh processes this script
runs). An ssh ControlPersist master outlives its ansible-playbook and is not reaped by it: during a measured run the
benchmark is a child subreaper, and at the run's end it stops the masters and reaps them with podman exec's exited
conmon processes, so their CPU is counted (each configuration also gets its own control directory).
Work inside the containers is not controller CPU and is not counted. Wall times depend on the machine's load: the
load average is printed with every row.

    python3 tests/bench/site_bench.py [--nodes 1,4,16,32] [--configs default,factcache,...] [--no-baseline]
                                      [--json results.json] [--keep]

`make bench-site` runs it with the Makefile's environment (collections path, container ulimits, memlock).
Exit status 1 when a no-op re-run changed something or a run failed; the table is printed either way.
"""

import argparse
import concurrent.futures
import contextlib
import ctypes
import json
import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
LAB_INVENTORY = os.path.join(ROOT, "inventories", "lab")
LAB_UP = os.path.join(ROOT, "tests", "lab", "playbooks", "lab_up.yml")
CHECK = os.path.join(ROOT, "playbooks", "check.yml")
CHECK_TASK = "Run each node's own fabric check"
LAB_DOWN = os.path.join(ROOT, "tests", "lab", "playbooks", "lab_down.yml")
SITE = os.path.join(ROOT, "playbooks", "site.yml")
BLOG_SCRIPT = os.path.join(HERE, "blog_setup.sh")
MITOGEN_REQUIREMENTS = os.path.join(HERE, "requirements-mitogen.txt")
MITOGEN_DIR = os.path.join(ROOT, ".build", "bench-mitogen")
MIRROR_MANIFEST = os.path.join(os.environ.get("LAB_MIRROR_CACHE", "/var/tmp/gpucluster-lab-mirror"), "current.json")
GPU_GROUP = "gpu_nodes"
SM_GROUP = "subnet_managers"
FANOUT = 32  # pdsh's default
CONFIGS = (
    "default",
    "pipelining",
    "ansiblecfg",
    "podman",
    "factcache",
    "pipelining+factcache",
    "mitogen",
    "mitogen+factcache",
)
BENCH_MGMT_PREFIX = "10.89.87"  # management addresses (lab_mgmt_address) on the lab management network


SM_NODE = "bench-sm-01"
BENCH_LAB = "bench"  # lab_name: fabric network gpucluster-bench-fabric, SSH material under $LAB_SSH_ROOT/bench
# What the bench lab leaves out of `make lab`'s: Slurm, and the node check's 10 s timer (32 containers checking
# themselves every 10 s would load the machine the benchmark measures); the node check is still installed.
BENCH_HOST_VARS = {"lab_name": BENCH_LAB, "lab_slurm": False, "node_check_interval": 3600}


def node_names(n):
    return [f"bench-gpu-{i:02d}" for i in range(1, n + 1)]


def gpu_vars(i):
    """Host variables of GPU node i (1-based): a management address, a port GUID for ibsim, a fabric address, the
    bench's lab name."""
    return {
        "lab_mgmt_address": f"{BENCH_MGMT_PREFIX}.{10 + i}",
        "fabric_port_guids": [f"0x0002c90300d{i:03x}01"],
        "lab_fabric_address": f"192.168.87.{10 + i}/24",
        **BENCH_HOST_VARS,
    }


def emptied(group):
    """The lab's group tree with every host removed (group vars and children kept)."""
    out = {}
    for key, value in (group or {}).items():
        if key == "hosts":
            out["hosts"] = {}
        elif key == "children":
            out["children"] = {name: emptied(child) for name, child in (value or {}).items()}
        else:
            out[key] = value
    return out


def write_inventory(directory, n, podman=False):
    """hosts.yml: the lab's groups with N bench GPU nodes and a bench subnet manager; group_vars linked to the
    lab's. Host variables, because inventory group_vars/all (the lab's address and fabric network) outranks group
    variables written in hosts.yml. With ``podman``, each host's ansible_host is its container's name."""
    with open(os.path.join(LAB_INVENTORY, "hosts.yml")) as f:
        lab = yaml.safe_load(f) or {}
    tree = emptied(lab.get("all", {}))
    children = tree.setdefault("children", {})
    children.setdefault(GPU_GROUP, {})["hosts"] = {name: gpu_vars(i) for i, name in enumerate(node_names(n), start=1)}
    children.setdefault(SM_GROUP, {})["hosts"] = {
        SM_NODE: {
            "lab_mgmt_address": f"{BENCH_MGMT_PREFIX}.2",
            "fabric_port_guids": ["0x0002c90300d00001"],
            **BENCH_HOST_VARS,
        }
    }
    if podman:
        for group in (GPU_GROUP, SM_GROUP):
            for name, host in children[group]["hosts"].items():
                host["ansible_host"] = name
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "hosts.yml"), "w") as f:
        f.write("# generated by tests/bench/site_bench.py\n")
        yaml.safe_dump({"all": tree}, f, sort_keys=False)
    link = os.path.join(directory, "group_vars")
    if not os.path.lexists(link):
        os.symlink(os.path.join(LAB_INVENTORY, "group_vars"), link)
    return directory


def script_output(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout.strip()


def base_env(workdir):
    """The Makefile's environment, for a run that does not come through make."""
    env = dict(os.environ)
    env.setdefault("ANSIBLE_COLLECTIONS_PATH", os.path.join(ROOT, ".build", "collections"))
    env.setdefault("ANSIBLE_HOME", os.path.join(ROOT, ".ansible"))
    env.setdefault("ANSIBLE_ROLES_PATH", os.path.join(ROOT, "roles"))
    env.setdefault("LAB_SUITE", "bookworm")
    env.setdefault("LAB_SSH_ROOT", os.path.join(ROOT, ".build", "lab-ssh"))
    env.pop("ANSIBLE_CONFIG", None)  # each configuration is described by the environment alone
    env.pop("ANSIBLE_TRANSPORT", None)
    if "MOLECULE_ULIMIT_NOFILE" not in env or "MOLECULE_ULIMIT_NPROC" not in env:
        nofile, nproc = script_output("tests/lab/container-ulimits.sh").split()
        env["MOLECULE_ULIMIT_NOFILE"], env["MOLECULE_ULIMIT_NPROC"] = nofile, nproc
    env.setdefault("LAB_MEMLOCK_KIB", script_output("tests/lab/memlock-kib.sh"))
    env["LAB_REPORT_DIR"] = os.path.join(workdir, "reports")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_RETRY_FILES_ENABLED"] = "false"
    bin_dir = os.path.dirname(sys.executable)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    return env


def ensure_mitogen():
    """Mitogen from the hash-pinned requirements file, installed under .build/ (not into the venv)."""
    marker = os.path.join(MITOGEN_DIR, ".requirements")
    with open(MITOGEN_REQUIREMENTS) as f:
        wanted = f.read()
    have = None
    if os.path.exists(marker):
        with open(marker) as f:
            have = f.read()
    if have != wanted:
        shutil.rmtree(MITOGEN_DIR, ignore_errors=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--require-hashes", "--target",
             MITOGEN_DIR, "-r", MITOGEN_REQUIREMENTS],
            check=True,
        )  # fmt: skip
        with open(marker, "w") as f:
            f.write(wanted)
    return os.path.join(MITOGEN_DIR, "ansible_mitogen", "plugins", "strategy")


def config_env(config, env, workdir):
    env = dict(env)
    parts = config.split("+")
    # A control directory of its own: the configuration's ssh masters are found (and their CPU counted) by it.
    env["ANSIBLE_SSH_CONTROL_PATH_DIR"] = os.path.join(workdir, "cp")
    if "podman" in parts:
        env["ANSIBLE_TRANSPORT"] = "containers.podman.podman"  # the lab inventory sets none (ssh, the default)
    if "pipelining" in parts:
        env["ANSIBLE_PIPELINING"] = "true"
    if "ansiblecfg" in parts:  # copied: Ansible reads a configuration file only by the name *.cfg
        os.makedirs(workdir, exist_ok=True)
        shutil.copyfile(os.path.join(ROOT, "docs", "ansible.cfg.example"), os.path.join(workdir, "ansible.cfg"))
        env["ANSIBLE_CONFIG"] = os.path.join(workdir, "ansible.cfg")
    if "factcache" in parts:
        env["ANSIBLE_GATHERING"] = "smart"
        env["ANSIBLE_CACHE_PLUGIN"] = "ansible.builtin.jsonfile"
        env["ANSIBLE_CACHE_PLUGIN_CONNECTION"] = os.path.join(workdir, "facts")
        env["ANSIBLE_CACHE_PLUGIN_TIMEOUT"] = "86400"
    if "mitogen" in parts:
        env["ANSIBLE_STRATEGY_PLUGINS"] = ensure_mitogen()
        env["ANSIBLE_STRATEGY"] = "mitogen_linear"
        env["PYTHONPATH"] = MITOGEN_DIR + os.pathsep + env.get("PYTHONPATH", "")
    return env


def cpu(ru):
    return ru.ru_utime + ru.ru_stime


def subreaper(on):
    """While on, orphans of our children (ssh ControlPersist masters, which daemonise; podman exec's conmon) are
    re-parented to this process, so that their CPU reaches our RUSAGE_CHILDREN when we reap them (prctl
    PR_SET_CHILD_SUBREAPER, Linux). Turned on only around a measured run: the lab's containers, started by lab_up.yml
    between runs, keep init as their monitors' parent."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1 if on else 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _children():
    """{pid: (name, state)} of this process's children."""
    me = str(os.getpid())
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        except OSError:
            continue
        if status.get("PPid") == me:
            found[int(entry)] = (status.get("Name", ""), status.get("State", "")[:1])
    return found


def reap_leftovers():
    """Reap what a measured run left: exited orphans (zombies) and the ssh masters, which are stopped first.
    Anything else still running is left alone. Returns how many were reaped."""
    reaped = 0
    for pid, (name, state) in _children().items():
        if state != "Z" and name != "ssh":
            continue
        try:
            if state != "Z":
                os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
            reaped += 1
        except (ProcessLookupError, ChildProcessError):
            pass
    return reaped


def run_playbook(playbook, inventory, env, log):
    """ansible-playbook with the json callback; returns wall s, CPU s of its process tree (with the ssh masters it
    left behind, stopped and reaped at the end of the run), rc, parsed output."""
    env = dict(env, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inventory, playbook]
    load_before = os.getloadavg()[0]
    before = cpu(resource.getrusage(resource.RUSAGE_CHILDREN))
    subreaper(True)
    t0 = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        proc.wait()
    wall = time.monotonic() - t0
    masters = reap_leftovers()
    subreaper(False)
    used = cpu(resource.getrusage(resource.RUSAGE_CHILDREN)) - before
    with open(log) as f:
        text = f.read()
    try:
        result = json.loads(text[text.index("{") :])
    except ValueError:
        result = None
    return {
        "wall": wall,
        "cpu": used,
        "masters": masters,
        "rc": proc.returncode,
        "result": result,
        "log": log,
        "load": (load_before, os.getloadavg()[0]),
    }


def on_controller(res):
    delegated = res.get("_ansible_delegated_vars") or {}
    return delegated.get("ansible_connection") == "local" or delegated.get("ansible_host") in ("localhost", "127.0.0.1")


def changed_tasks(result):
    """(host, task, on the controller?) for every result that reported changed, from the json callback's output.
    fabric_validate writes a new report directory on the controller (delegate_to: localhost) on every run: those
    are counted apart from changes to the nodes."""
    found = []
    for play in (result or {}).get("plays", []):
        for task in play.get("tasks", []):
            for host, res in task.get("hosts", {}).items():
                if res.get("changed"):
                    found.append((host, task["task"]["name"], on_controller(res)))
    return found


def failures(result, limit=5):
    found = []
    for play in (result or {}).get("plays", []):
        for task in play.get("tasks", []):
            for host, res in task.get("hosts", {}).items():
                if (res.get("failed") or res.get("unreachable")) and not res.get("ignore_errors"):
                    found.append(f"{host}: {task['task']['name']}: {str(res.get('msg', ''))[:300]}")
    return found[:limit]


def lab(playbook, inventory, env, workdir, what):
    log = os.path.join(workdir, f"{what}.log")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inventory, playbook]
    with open(log, "w") as out:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT).returncode
    if rc != 0:
        with open(log) as f:
            sys.stderr.write(f.read()[-4000:])
        raise SystemExit(f"site_bench: {what} failed (rc {rc}); log {log}")


def fresh_nodes(inventory, env, workdir):
    lab(LAB_DOWN, inventory, env, workdir, "lab_down")
    lab(LAB_UP, inventory, env, workdir, "lab_up")


def node_check_seconds(result):
    """The node check's own time on each node (its report's duration_seconds), from the fleet check's output."""
    seconds = []
    for play in (result or {}).get("plays", []):
        for task in play.get("tasks", []):
            if not task["task"]["name"].endswith(CHECK_TASK):
                continue
            for res in task.get("hosts", {}).values():
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    seconds.append(json.loads(res.get("stdout") or "")["duration_seconds"])
    return seconds


def ansible_row(n, config, run, measured):
    stats = (measured["result"] or {}).get("stats", {})
    hosts = [h for h in stats if h.startswith("bench-")]
    host_tasks = sum(stats[h]["ok"] + stats[h]["failures"] + stats[h]["unreachable"] for h in hosts)
    return {
        "nodes": n,
        "hosts": len(hosts),
        "tool": "check.yml" if run == "fleet check" else "site.yml",
        "config": config,
        "run": run,
        "wall": measured["wall"],
        "cpu": measured["cpu"],
        "host_tasks": host_tasks,
        "skipped": sum(stats[h]["skipped"] for h in hosts),
        "changed": sum(1 for _, _, ctl in changed_tasks(measured["result"]) if not ctl),
        "changed_controller": sum(1 for _, _, ctl in changed_tasks(measured["result"]) if ctl),
        "failed": sum(stats[h]["failures"] + stats[h]["unreachable"] for h in hosts) or (measured["rc"] != 0),
        "load": measured["load"],
        "log": measured["log"],
        "node_check_s": node_check_seconds(measured["result"]) if run == "fleet check" else None,
    }


def blog_commands():
    """Commands per node in the blog's script (exports are shell built-ins; `a && b` counts 2)."""
    count = 0
    with open(BLOG_SCRIPT) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and not line.startswith("export "):
                count += 1 + line.count("&&")
    return count


def ssh_options(env):
    """The lab's SSH login as plain ssh/scp options (what an operator's pdsh/pdcp would use): the bench lab's
    ssh_config (key, known_hosts; tests/lab/playbooks/lab_up.yml), no connection sharing, no prompts."""
    config = os.path.join(env["LAB_SSH_ROOT"], BENCH_LAB, "ssh_config")
    return ["-F", config, "-o", "ControlMaster=no", "-o", "BatchMode=yes"]


def run_blog(nodes, addresses, mirror_base, workdir, run, env):
    """The blog's script on every node at once, like pdcp + pdsh: scp, then ssh <node> bash, per node."""
    trap = (
        f"cd /root && export CUDA_REPO_BASE={mirror_base} && "
        "trap 'echo \"blog_setup: FAILED ($?): $BASH_COMMAND\" >&2' ERR; . /tmp/blog_setup.sh"
    )
    options = ssh_options(env)

    def one(node):
        address = addresses[node]
        subprocess.run(
            ["scp", "-q", *options, BLOG_SCRIPT, f"root@{address}:/tmp/blog_setup.sh"], check=True, capture_output=True
        )
        proc = subprocess.run(
            ["ssh", *options, f"root@{address}", "bash", "-c", shlex.quote(trap)],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        with open(os.path.join(workdir, f"blog-{run}-{node}.log"), "w") as f:
            f.write(proc.stdout + proc.stderr)
        failed = [line.split(": ", 2)[2] for line in proc.stderr.splitlines() if line.startswith("blog_setup: FAILED")]
        failed = [command for command in failed if command != ". /tmp/blog_setup.sh"]  # the wrapper, not the blog
        return proc.returncode, failed

    load_before = os.getloadavg()[0]
    before = cpu(resource.getrusage(resource.RUSAGE_CHILDREN))
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=FANOUT) as pool:
        results = list(pool.map(one, nodes))
    wall = time.monotonic() - t0
    used = cpu(resource.getrusage(resource.RUSAGE_CHILDREN)) - before
    return {
        "nodes": len(nodes),
        "hosts": len(nodes),
        "tool": "blog script",
        "config": "scp + ssh, fan-out 32",
        "run": run,
        "wall": wall,
        "cpu": used,
        "host_tasks": blog_commands() * len(nodes),
        "skipped": 0,
        "changed": None,
        "changed_controller": None,
        "failed": False,
        "exit_codes": sorted({rc for rc, _ in results}),
        "failed_commands": results[0][1],
        "load": (load_before, os.getloadavg()[0]),
    }


def mirror_base():
    if not os.path.exists(MIRROR_MANIFEST):
        subprocess.run([os.path.join(ROOT, "tests", "lab", "mirror", "mirror.sh"), "start"], check=True, cwd=ROOT)
    with open(MIRROR_MANIFEST) as f:
        return json.load(f)["variants"]["signed"]


def fmt_row(r):
    n = r.get("hosts") or r["nodes"]
    tasks = r["host_tasks"] / n if n else 0
    per_task = r["cpu"] / r["host_tasks"] if r["host_tasks"] else float("nan")
    changed = "n/a" if r["changed"] is None else f"{r['changed']} / {r['changed_controller']}"
    return (
        f"| {r['nodes']} | {n} | {r['tool']} | {r['config']} | {r['run']} | {r['wall']:.1f} | {r['cpu']:.1f} | "
        f"{r['cpu'] / n:.2f} | "
        f"{tasks:.0f} | {r['skipped'] / n:.0f} | {per_task:.3f} | {changed} | {r['load'][0]:.1f}→{r['load'][1]:.1f} |"
    )


HEADER = (
    "| GPU nodes | hosts | tool | config | run | wall s | controller CPU s | CPU s/host | tasks/host | skipped/host | "
    "CPU s/host-task | changed nodes / controller | load 1-min |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="1,4,16,32", help="comma-separated node counts")
    parser.add_argument("--configs", default="default,pipelining,mitogen,podman")
    parser.add_argument("--no-baseline", action="store_true", help="skip the blog's script")
    parser.add_argument("--json", help="write every row (and log paths) to this file")
    parser.add_argument("--keep", action="store_true", help="leave the bench nodes and the temporary directory")
    args = parser.parse_args()
    counts = [int(x) for x in args.nodes.split(",")]
    configs = [c for c in args.configs.split(",") if c]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        parser.error(f"--configs: unknown {unknown}; choose from {', '.join(CONFIGS)}")

    workdir = tempfile.mkdtemp(prefix="site-bench-")
    env = base_env(workdir)
    base = mirror_base() if not args.no_baseline else None
    print(f"site_bench: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, work dir {workdir}", flush=True)
    rows, problems = [], []
    inventory = None
    try:
        for n in counts:
            for config in configs:
                cdir = os.path.join(workdir, f"n{n}-{config}")
                podman = "podman" in config.split("+")
                inventory = write_inventory(os.path.join(cdir, "inventory"), n, podman=podman)
                fresh_nodes(inventory, env, cdir)
                cenv = config_env(config, env, cdir)
                for run in ("converge", "re-run", "fleet check"):
                    playbook = CHECK if run == "fleet check" else SITE
                    measured = run_playbook(playbook, inventory, cenv, os.path.join(cdir, f"{run}.log"))
                    row = ansible_row(n, config, run, measured)
                    rows.append(row)
                    print(fmt_row(row), flush=True)
                    if row["node_check_s"]:
                        times = sorted(row["node_check_s"])
                        print(
                            f"node check on the node, {len(times)} hosts: median {times[len(times) // 2]:.2f} s, "
                            f"max {times[-1]:.2f} s",
                            flush=True,
                        )
                    if row["failed"]:
                        problems.append(f"{n} nodes, {config}, {run}: failed (rc {measured['rc']}), log {row['log']}")
                        problems += ["  " + f for f in failures(measured["result"])]
                        break
                    if run != "converge" and row["changed"]:
                        problems.append(
                            f"{n} nodes, {config}: the no-op re-run changed {row['changed']} task(s) on nodes: "
                            + "; ".join(f"{h}: {t}" for h, t, ctl in changed_tasks(measured["result"]) if not ctl)
                        )
            if not args.no_baseline:
                bdir = os.path.join(workdir, f"n{n}-blog")
                inventory = write_inventory(os.path.join(bdir, "inventory"), n)
                fresh_nodes(inventory, env, bdir)
                addresses = {name: gpu_vars(i)["lab_mgmt_address"] for i, name in enumerate(node_names(n), start=1)}
                for run in ("first run", "re-run"):
                    row = run_blog(node_names(n), addresses, base, bdir, run, env)
                    rows.append(row)
                    print(fmt_row(row), flush=True)
                print(
                    f"blog script, {n} nodes: exit codes {row['exit_codes']}; commands that failed on "
                    f"{node_names(n)[0]}: {row['failed_commands']}",
                    flush=True,
                )
    finally:
        if inventory and not args.keep:
            everything = write_inventory(os.path.join(workdir, "teardown"), max(counts))
            lab(LAB_DOWN, everything, env, workdir, "lab_down-final")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
        print("\n" + HEADER)
        for row in rows:
            print(fmt_row(row))
        for row in rows:
            if row.get("failed_commands") is not None and row["run"] == "re-run":
                print(f"blog script on {row['nodes']} node(s), failed commands per node: {row['failed_commands']}")
        if args.keep or problems:
            print(f"site_bench: logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    if problems:
        print("\nsite_bench: FAILED\n" + "\n".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
