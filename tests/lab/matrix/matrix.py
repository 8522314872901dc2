#!/usr/bin/env python3
"""The ansible-core version matrix (`make matrix`) and the README support matrix written from what it ran.

  matrix.py run --out DIR --tarball TARBALL --suites SUITE... [--jobs N]
  matrix.py readme (--check | --write) RESULTS_JSON README

The matrix is the locks in this directory, one per ansible-core release (core-<version>.txt). A lock's first line
says where that release's controller runs: `# matrix-controller: host` (this machine's Python; the Makefile makes
.venv-core-<version>) or `# matrix-controller: trixie` (tests/lab/controller/run.sh: a Debian trixie container, for
releases that need a newer Python than Debian 12's). `run` checks every release against meta/runtime.yml's
requires_ansible (and that the oldest release it admits is tested), then runs, per release:

- the unit tests (tests/unit, tests/repo), those that run ansible-playbook (marker `playbook`) on the newest only;
- ansible-test sanity on the built tarball installed into a clean path, on the controller's Python; on the oldest
  release, also the compile and import tests on Python 3.8 (the Ubuntu 20.04 target) where this machine has one;
- the tarball smoke (tests/lab/tarball-smoke/run.sh): that release's ansible-galaxy installs the tarball into a clean
  path and a user's own playbook runs from it against one lab container per suite (the first suite only on the
  newer releases, whose scenario site covers both), and, on the oldest release, a
  bookworm container managed through Python 3.8 where this machine has one;
- scenario `site` with site.yml from the installed tarball: on the newest release, its whole test sequence (the
  fault tests included); on every other trixie release, create, converge, idempotence and destroy.

Every run fails on a deprecation warning in its output. `run` writes RESULTS_JSON and fails when any run failed.
`readme` renders the support matrix from RESULTS_JSON between the markers in README; --check fails when the README
says something else.
"""

import argparse
import glob
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
CONTROLLER_RUN = ROOT / "tests" / "lab" / "controller" / "run.sh"
PODMAN_SERVICE = ROOT / "tests" / "lab" / "controller" / "podman-service.sh"
SANITY = ROOT / "tests" / "lab" / "ansible-test" / "sanity.sh"
SITE_SCENARIO = "site"
# Scenario site's host names and addresses exist per suite (molecule/site/host_vars): the newest release's whole
# sequence and another release's converge run on different suites, so that they can run at once.
SITE_SUITES = {"full": "bullseye", "converge": "bookworm"}
# Molecule's podman driver and connection need containers.podman besides the collection's own dependencies.
TOOL_COLLECTIONS = ["containers.podman"]
# A deprecation warning, or ansible-core's warning that a collection's requires_ansible does not admit it
# (ansible/plugins/loader.py: "Collection <name> does not support Ansible version <version>").
DEPRECATION = re.compile(r"\[DEPRECATION WARNING\]|Collection \S+ does not support Ansible version")
BEGIN = "<!-- support-matrix: written by `make support-matrix` from what `make matrix` ran; do not edit -->"
END = "<!-- end support-matrix -->"


def _requires_ansible(runtime_yml):
    data = yaml.safe_load(Path(runtime_yml).read_text()) or {}
    return data.get("requires_ansible")


def locks(directory=HERE):
    """{version: controller} from the locks core-<version>.txt, oldest first."""
    found = {}
    for path in directory.glob("core-*.txt"):
        first = path.read_text().splitlines()[0]
        match = re.match(r"#\s*matrix-controller:\s*(host|trixie)\b", first)
        if not match:
            raise SystemExit(f"{path}: the first line must be `# matrix-controller: host|trixie`")
        found[path.name[len("core-") : -len(".txt")]] = match.group(1)
    return dict(sorted(found.items(), key=lambda item: Version(item[0])))


def python38():
    """A Python 3.8 interpreter on this machine (PATH, then pyenv's versions), as its own real path, or None."""
    pyenv = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates = [shutil.which("python3.8"), *sorted(glob.glob(f"{pyenv}/versions/3.8*/bin/python3.8"), reverse=True)]
    for candidate in filter(None, candidates):
        probe = subprocess.run(
            [
                candidate,
                "-c",
                "import os, sys; print(sys.version_info[:2] == (3, 8), os.path.realpath(sys.executable))",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        answer = probe.stdout.split()
        if probe.returncode == 0 and answer[:1] == ["True"]:
            return answer[1]
    return None


class Core:
    """One ansible-core release: its venv and how to run a command with it."""

    def __init__(self, version, controller):
        self.version, self.controller = version, controller
        self.venv = ROOT / f".venv-core-{version}"

    def command(self, argv):
        if self.controller == "trixie":
            return [str(CONTROLLER_RUN), self.version, *argv]
        return argv

    def env(self, **extra):
        env = dict(os.environ)
        env["PATH"] = f"{self.venv / 'bin'}:{env['PATH']}"
        env["ANSIBLE_COLLECTIONS_PATH"] = str(ROOT / ".build" / "collections")
        env["NO_COLOR"] = "1"  # plain logs; Molecule colours even when writing to a file
        env.update(extra)
        return env

    def output(self, argv, **extra):
        done = subprocess.run(self.command(argv), env=self.env(**extra), cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:  # what the command said, not only that it failed
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-20:])
            raise RuntimeError(f"{' '.join(self.command(argv))} exited {done.returncode}:\n{tail}")
        return done.stdout


def describe_core(core, claim):
    """ansible-core, Python and the collections a release's venv brings; fails where they contradict a claim."""
    script = "import ansible.release, platform; print(ansible.release.__version__, platform.python_version())"
    version, python = core.output(["python", "-c", script]).split()
    problems = []
    if version != core.version:
        problems.append(f"{core.venv}: ansible-core {version}, but its lock says {core.version}")
    if Version(version) not in claim:
        problems.append(f"ansible-core {version} is outside meta/runtime.yml's requires_ansible {claim}")
    listing = core.output(["ansible-galaxy", "collection", "list", "--format", "json"])
    found = {}
    for path, collections in json.loads(listing).items():
        for fqcn, info in collections.items():
            found.setdefault(fqcn, (path, info["version"]))
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    collections = {}
    for fqcn in sorted(set(galaxy.get("dependencies") or {}) | set(TOOL_COLLECTIONS)):
        if fqcn not in found:
            problems.append(f"{core.venv}: collection {fqcn} is not installed")
            continue
        path, collection_version = found[fqcn]
        requires = _requires_ansible(Path(path, *fqcn.split("."), "meta", "runtime.yml"))
        if requires and Version(version) not in SpecifierSet(requires):
            problems.append(f"{core.venv}: {fqcn} {collection_version} requires ansible {requires}, not {version}")
        collections[fqcn] = collection_version
    where = "Debian trixie container" if core.controller == "trixie" else "this machine"
    described = {
        "core": version,
        "python": python,
        "controller": core.controller,
        "controller_text": f"{where}, Python {_minor(python)}",
        "venv": core.venv.name,
        "collections": collections,
    }
    return described, problems


def lab_image(suite):
    """The exact lab image tag (<suite>-<recipe hash>) for a suite; build-image.sh builds it where it is missing."""
    output = subprocess.run(
        [str(ROOT / "tests" / "lab" / "images" / "build-image.sh"), suite], check=True, capture_output=True, text=True
    ).stdout
    match = re.search(r"^lab image (\S+) (?:is current|built)", output, re.M)
    if not match:
        raise SystemExit(f"no lab image tag for {suite} in build-image.sh's output:\n{output}")
    return match.group(1)


def describe_image(image):
    """Distribution and Python of a lab image, read from the image itself."""
    script = '. /etc/os-release; echo "$NAME"; echo "$VERSION_ID"; echo "$VERSION_CODENAME"; python3 -V'
    limits = subprocess.run(
        [str(ROOT / "tests" / "lab" / "container-ulimits.sh")], check=True, capture_output=True, text=True
    ).stdout.split()
    ulimits = [f"--ulimit={name}={value}:{value}" for name, value in zip(("nofile", "nproc"), limits)]
    lines = subprocess.run(
        ["podman", "run", "--rm", "--network", "none", *ulimits, image, "/bin/sh", "-c", script],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    name, version, codename, python = lines[:4]
    return {"image": image, "name": name, "version": version, "codename": codename, "python": python.split()[-1]}


def deprecations(text):
    """The deprecation warnings in a run's output (ansible-core prints each as `[DEPRECATION WARNING]: ...`), and the
    warnings that a collection does not support this ansible-core."""
    return [line.strip() for line in text.splitlines() if DEPRECATION.search(line)]


# The traceback ansible-core prints when its results thread dies (a race, ansible/ansible#85879): the run then hangs.
RESULTS_THREAD_DIED = re.compile(r"Exception in thread .*results_thread_main")
# The longest a job may take (scenario site with every step takes about 19 minutes on a loaded 2-core machine).
JOB_TIMEOUT = 45 * 60
POLL_SECONDS = 5


class Job:
    def __init__(self, core, check, suites, command, env, log, after=None):
        self.core, self.check, self.suites = core, check, suites
        self.command, self.env, self.log, self.after = command, env, log, after

    @property
    def title(self):
        where = f" on {' '.join(self.suites)}" if self.suites else ""
        return f"{self.check} with ansible-core {self.core}{where}"

    def _attempt(self):
        """Run the command once: (exit status, its output). A hang is cut short: ansible-core's results thread can die
        (RESULTS_THREAD_DIED), after which ansible-playbook waits for ever, and no job may outlive JOB_TIMEOUT."""
        deadline = time.monotonic() + JOB_TIMEOUT
        with open(self.log, "w") as log:
            proc = subprocess.Popen(
                self.command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            while proc.poll() is None:
                time.sleep(POLL_SECONDS)
                died = RESULTS_THREAD_DIED.search(Path(self.log).read_text(errors="replace"))
                if died or time.monotonic() > deadline:
                    # TERM first, so that the job's own cleanup (molecule's, run.sh's trap) removes its containers
                    os.killpg(proc.pid, signal.SIGTERM)
                    try:
                        proc.wait(timeout=120)
                    except subprocess.TimeoutExpired:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                    return ("results-thread" if died else "timeout"), Path(self.log).read_text(errors="replace")
        return proc.returncode, Path(self.log).read_text(errors="replace")

    def run(self):
        print(f"START {self.title}", flush=True)
        start = time.monotonic()
        rc, text = self._attempt()
        retried = None
        if rc == "results-thread":
            # ansible/ansible#85879, #86027: a worker's result arrives for a task the strategy no longer holds; the
            # run is lost, not the collection's code. Once, from the start, and the result says so.
            retried = "ansible-core's results thread died (KeyError in _convert_wire_task_result_to_raw)"
            Path(self.log).rename(f"{self.log}.first-attempt")
            print(f"RETRY {self.title}: {retried}; the first attempt's log is {self.log}.first-attempt", flush=True)
            rc, text = self._attempt()
        detail, problem = {}, None
        warned = deprecations(text)
        if rc == "timeout":
            problem = f"still running after {JOB_TIMEOUT} s"
        elif rc == "results-thread":
            problem = "ansible-core's results thread died twice (ansible/ansible#85879)"
        elif rc != 0:
            problem = f"exit status {rc}"
        elif warned:
            problem = f"{len(warned)} deprecation warning(s), the first: {warned[0]}"
        elif self.after:
            detail, problem = self.after()
        seconds = round(time.monotonic() - start)
        if problem:
            tail = text.splitlines()[-120:]
            print(f"FAIL  {self.title} ({seconds} s): {problem}; last lines of {self.log}:", flush=True)
            print("\n".join(tail), flush=True)
            # The lines of the log that say why, for the end of `make test`'s output.
            subprocess.run(
                [str(ROOT / "tests/lab/why-failed.sh"), f"{self.title}: {problem}", str(self.log)], check=False
            )
        else:
            print(f"PASS  {self.title} ({seconds} s)", flush=True)
        return {
            "core": self.core,
            "check": self.check,
            "suites": self.suites,
            "retried": retried,
            "result": "failed" if problem else "passed",
            "problem": problem,
            "seconds": seconds,
            "detail": detail,
            "log": str(self.log),
        }


def _junit_counts(path, playbooks=True):
    def check():
        root = ET.parse(path).getroot()
        suite = root if root.tag == "testsuite" else root.find("testsuite")
        counts = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
        counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
        counts["playbook_tests"] = playbooks
        # The ansible-playbook tests live in tests/unit/plugins/action: run and passed where asked, absent elsewhere.
        ran = [
            case for case in root.iter("testcase") if ".plugins.action." in case.get("classname", "") and not list(case)
        ]
        problem = None
        if counts["failures"] or counts["errors"] or not counts["passed"]:
            problem = f"unit tests: {counts}"
        elif playbooks and not ran:
            problem = "unit tests: no test of tests/unit/plugins/action ran and passed"
        elif not playbooks and ran:
            problem = f"unit tests: {len(ran)} `playbook` tests ran where they were deselected"
        return counts, problem

    return check


def _sanity_ran(log, pythons, tests=None):
    def check():
        text = Path(log).read_text(errors="replace")
        missing = [
            python for python in pythons if not re.search(rf"^Running sanity test .* on Python {python}\b", text, re.M)
        ]
        if missing:
            return {}, f"ansible-test ran no sanity test on Python {', '.join(missing)}"
        return ({"pythons": pythons, "tests": tests} if tests else {"pythons": pythons}), None

    return check


def _molecule_used(log, core, scenario):
    def check():
        text = Path(log).read_text(errors="replace")
        # Recorded before the run: the ansible-core Molecule found (its first line of `molecule --version`).
        if not re.search(rf"^\s*ansible:{re.escape(core)}$", text, re.M):
            return {}, f"Molecule did not use ansible-core {core} (see `molecule --version` at the top of the log)"
        # And the collection it ran was the installed tarball, alone (`ansible-galaxy collection list` before it).
        listed = re.findall(r"^# (/\S+)\nCollection .*\n-+ .*\ngpucluster\.fabric ", text, re.M)
        if len(listed) != 1 or "/installed" not in listed[0]:
            return {}, f"scenario {scenario} did not see gpucluster.fabric only in the installed tarball: {listed}"
        return {}, None

    return check


def _smoke_targets(out, core, suites):
    def check():
        targets = [json.loads(path.read_text()) for path in sorted(Path(out, "targets").glob("*.json"))]
        seen = sorted(target["suite"] for target in targets)
        if seen != sorted(suites) or any(target["ansible_core"] != core for target in targets):
            return {
                "targets": targets
            }, f"the smoke playbook did not report every target {suites} on ansible-core {core}"
        return {"targets": targets}, None

    return check


def jobs_for(core, role, suites, images, tarball, out, py38):
    """The runs of one release; role is oldest, newest or between."""
    version = core.version
    core_out = Path(out) / f"core-{version}"
    core_out.mkdir(parents=True, exist_ok=True)
    jobs = []

    junit = core_out / "unit.xml"
    unit = ["pytest", "tests/unit", "tests/repo", "-p", "no:cacheprovider", f"--junitxml={junit}"]
    # The tests that run ansible-playbook (marker `playbook`: the action plugins in real runs, 85 % of the unit tests'
    # time) on the newest release only: on every release the action plugins run in real playbooks anyway, in the
    # tarball smoke (the preflight, the rdma role, a validation report) and in scenario site on the newer ones.
    playbooks = role == "newest"
    if not playbooks:
        unit += ["-m", "not playbook"]
    jobs.append(
        Job(
            version,
            "unit tests",
            [],
            core.command(unit),
            core.env(),
            core_out / "unit.log",
            _junit_counts(junit, playbooks),
        )
    )

    sanity_root = Path(os.environ.get("TMPDIR", "/tmp")) / f"gpucluster-fabric-sanity-{_checkout_id()}-core{version}"
    if core.controller == "trixie":
        pythons, tests = [_minor(core.python)], None
        argv = [str(SANITY), str(tarball), str(sanity_root), "sanity", "--python", pythons[0]]
    elif py38:
        # The target-side tests on Python 3.8 (modules and module_utils must still run there); the controller-side
        # ones run on the main venv's Python in `make sanity`.
        pythons, tests = ["3.8"], ["compile", "import"]
        argv = [
            "/bin/sh",
            "-c",
            f'PATH="{Path(py38).parent}:$PATH" exec "$0" "$@"',
            str(SANITY),
            str(tarball),
            str(sanity_root),
            "sanity",
            "--python",
            "3.8",
            "--test",
            "compile",
            "--test",
            "import",
        ]
    else:
        pythons, tests = [], None
    if pythons:
        log = core_out / "sanity.log"
        jobs.append(
            Job(
                version,
                "ansible-test sanity",
                [],
                core.command(argv),
                core.env(),
                log,
                _sanity_ran(log, pythons, tests),
            )
        )

    smoke_out = core_out / "tarball-smoke"
    # Every suite on the oldest release (the Ubuntu 20.04 generation's targets are its own); one on the newer ones,
    # whose scenario site runs every role from the installed tarball on both suites between them.
    suites = list(suites) if role == "oldest" else list(suites)[:1]
    smoke_suites = list(suites)
    smoke_env = {}
    if role == "oldest" and py38:
        smoke_suites.append("bookworm-python3.8")
        smoke_env["SMOKE_PYTHON38"] = py38
    argv = [
        str(ROOT / "tests" / "lab" / "tarball-smoke" / "run.sh"),
        str(core.venv),
        str(tarball),
        str(smoke_out),
        *suites,
    ]
    jobs.append(
        Job(
            version,
            "tarball smoke",
            smoke_suites,
            core.command(argv),
            core.env(**smoke_env),
            core_out / "tarball-smoke.log",
            _smoke_targets(smoke_out, version, smoke_suites),
        )
    )

    if core.controller == "trixie" and role != "oldest":
        kind = "full" if role == "newest" else "converge"
        suite = SITE_SUITES[kind]
        installed = Path(os.environ.get("TMPDIR", "/tmp")) / f"gpucluster-fabric-site-{_checkout_id()}-core{version}"
        base = f'-c "{ROOT / ".config" / "molecule" / "config.yml"}"'
        if kind == "full":
            steps = f"exec molecule {base} test -s {SITE_SCENARIO}"
        else:
            # The scenario's own test sequence is the full one; these steps are run one by one instead.
            steps = (
                f"trap 'molecule {base} destroy -s {SITE_SCENARIO}' EXIT; molecule {base} destroy -s {SITE_SCENARIO}"
                + "".join(
                    f" && molecule {base} {step} -s {SITE_SCENARIO}" for step in ("create", "converge", "idempotence")
                )
            )
        log = core_out / f"molecule-{SITE_SCENARIO}-{suite}.log"
        script = (
            f'rm -rf "{installed}"'
            f' && ansible-galaxy collection install --no-deps -p "{installed}/installed" "{tarball}"'
            f" && molecule --version && ansible-galaxy collection list gpucluster.fabric && {steps}"
        )
        env = core.env(
            ANSIBLE_COLLECTIONS_PATH=f"{installed}/installed",
            MOLECULE_SUITE=suite,
            MOLECULE_IMAGE=images[suite],
            MOLECULE_EPHEMERAL_DIRECTORY=str(ROOT / ".cache" / "molecule-matrix" / f"core-{version}" / f"site-{suite}"),
            ANSIBLE_DEPRECATION_WARNINGS="true",
        )
        check = "scenario site" if kind == "full" else "scenario site: converge, idempotence"
        jobs.append(
            Job(
                version,
                check,
                [suite],
                core.command(["/bin/bash", "-c", script]),
                env,
                log,
                _molecule_used(log, version, SITE_SCENARIO),
            )
        )
    return jobs


def _checkout_id():
    """One per checkout, so that two checkouts' runs on one machine never share a directory."""
    return hashlib.md5(str(ROOT).encode()).hexdigest()[:8]


def run(args):
    claim = SpecifierSet(_requires_ansible(ROOT / "meta" / "runtime.yml"))
    releases = locks()
    cores = [Core(version, controller) for version, controller in releases.items()]
    suites = sorted(set(args.suites) | set(SITE_SUITES.values()))
    # Each description starts a container (a release's controller, a lab image): all at once, not one after another,
    # so that the jobs (scenario site on the newest release is the longest run of CI) start a minute or two sooner.
    with ThreadPoolExecutor(max_workers=len(cores) + len(suites)) as pool:
        core_futures = [pool.submit(describe_core, core, claim) for core in cores]
        image_futures = {suite: pool.submit(lambda suite: describe_image(lab_image(suite)), suite) for suite in suites}
        core_descriptions = [future.result() for future in core_futures]
        targets = {suite: future.result() for suite, future in image_futures.items()}
    images = {suite: target["image"] for suite, target in targets.items()}
    described, problems = [], []
    for core, (info, core_problems) in zip(cores, core_descriptions):
        core.python = info["python"]
        described.append(info)
        problems += core_problems
    tested = {Version(core.version) for core in cores}
    for spec in claim:
        if spec.operator == ">=" and Version(spec.version) not in tested:
            problems.append(f"meta/runtime.yml claims {spec}, but no lock tests ansible-core {spec.version}")
    if problems:
        raise SystemExit("matrix: " + "\n  ".join(["cannot run:", *problems]))
    py38 = python38()
    if py38:
        targets["bookworm-python3.8"] = dict(targets["bookworm"], python=_python_version(py38), interpreter=py38)
    jobs = []
    for index, core in enumerate(cores):
        role = "oldest" if index == 0 else "newest" if index == len(cores) - 1 else "between"
        jobs += jobs_for(core, role, args.suites, images, args.tarball, args.out, py38)
    if args.only:
        jobs = [job for job in jobs if re.search(args.only, job.title)]
    # The longest runs first, so that they start while the pool is empty.
    jobs.sort(key=lambda job: not job.check.startswith("scenario site"))
    try:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            runs = list(pool.map(Job.run, jobs))
    finally:
        # The host's podman service the trixie controller talks to (controller/run.sh starts it when first needed).
        subprocess.run([str(PODMAN_SERVICE), "stop"], check=False)
    os_release = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
    results = {
        "controller": {"os": os_release.get("PRETTY_NAME", "").strip('"'), "python": platform.python_version()},
        "requires_ansible": str(_requires_ansible(ROOT / "meta" / "runtime.yml")),
        "cores": described,
        "targets": targets,
        "python38": py38,
        "runs": runs,
    }
    Path(args.out, "results.json").write_text(json.dumps(results, indent=2) + "\n")
    failed = [job["core"] + ": " + job["check"] for job in runs if job["result"] != "passed"]
    print(f"matrix: {len(runs) - len(failed)} of {len(runs)} runs passed; results in {args.out}/results.json")
    return 1 if failed else 0


def _python_version(python):
    return subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _minor(version):
    return ".".join(version.split(".")[:2])


def render(results):
    """The README's support matrix section, from what ran (only runs that passed are claimed)."""
    targets = results["targets"]

    def target(suite):
        t = targets[suite]
        return f"{t['name']} {t['version']} ({t['codename']}), Python {_minor(t['python'])}"

    def newest_first(suites):
        return sorted(
            suites,
            key=lambda suite: (Version(targets[suite]["version"]), Version(targets[suite]["python"])),
            reverse=True,
        )

    lines = [
        BEGIN,
        f"`make matrix` (part of `make test`) ran these on a {results['controller']['os']} machine; "
        f'`meta/runtime.yml` claims `requires_ansible: "{results["requires_ansible"]}"`. '
        "Every run fails on a deprecation warning.",
        "",
        "| ansible-core | controller | unit tests | `ansible-test sanity` on the tarball "
        "| the tarball installed by that release, a user's playbook from it (targets) "
        "| scenario `site` (site.yml from the installed tarball) |",
        "|---|---|---|---|---|---|",
    ]
    for core in sorted(results["cores"], key=lambda c: Version(c["core"])):
        runs = [run for run in results["runs"] if run["core"] == core["core"] and run["result"] == "passed"]
        unit = [run for run in runs if run["check"] == "unit tests"]
        unit_text = "passed" if unit else "not run"
        notes = []
        if unit and unit[0]["detail"].get("playbook_tests") is False:
            notes.append("not the `playbook` ones")
        if unit and unit[0]["detail"].get("skipped"):
            notes.append(f"{unit[0]['detail']['skipped']} skipped")
        if notes:
            unit_text += f" ({', '.join(notes)})"
        sanity = [run for run in runs if run["check"] == "ansible-test sanity"]
        sanity_text = "not run"
        if sanity:
            sanity_text = "Python " + ", ".join(sanity[0]["detail"].get("pythons", []))
            if sanity[0]["detail"].get("tests"):
                sanity_text += f" ({', '.join(sanity[0]['detail']['tests'])})"
        smoke = newest_first(suite for run in runs if run["check"] == "tarball smoke" for suite in run["suites"])
        site = [run for run in runs if run["check"].startswith("scenario site")]
        site_text = "not run"
        if site:
            what = (
                "every step, the fault tests included"
                if site[0]["check"] == "scenario site"
                else "converge, idempotence"
            )
            site_text = f"{what}: {target(site[0]['suites'][0])}"
        lines.append(
            f"| {core['core']} | {core.get('controller_text', 'Python ' + _minor(core['python']))} | {unit_text} "
            f"| {sanity_text} | {'<br>'.join(map(target, smoke)) or 'not run'} | {site_text} |"
        )
    lines.append("")
    for core in sorted(results["cores"], key=lambda c: Version(c["core"])):
        collections = ", ".join(f"{name} {version}" for name, version in sorted(core["collections"].items()))
        lines.append(f"- {core['core']} with {collections}.")
    lines.append(END)
    return "\n".join(lines) + "\n"


# What the README claims only where the machine has a Python 3.8: the bookworm target managed through it (tarball
# smoke) and the 2.19 sanity tests on it.
PYTHON38_CLAIMS = (
    (re.compile(r"<br>[^|<]*, Python 3\.8(?= *\||<br>)"), ""),
    (re.compile(r"Python 3\.8 \(compile, import\)"), "not run"),
)


def without_python38(section):
    """The support matrix as a machine without Python 3.8 renders it."""
    for pattern, replacement in PYTHON38_CLAIMS:
        section = pattern.sub(replacement, section)
    return section


def readme(args):
    results = json.loads(Path(args.results).read_text())
    failed = [run for run in results["runs"] if run["result"] != "passed"]
    text = Path(args.readme).read_text()
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END) + r"\n", re.S)
    if not pattern.search(text):
        raise SystemExit(f"{args.readme}: no support matrix markers ({BEGIN} ... {END})")
    section = render(results)
    if args.write:
        if failed:
            raise SystemExit(f"{args.results}: {len(failed)} run(s) failed; not writing a support matrix from them")
        Path(args.readme).write_text(pattern.sub(lambda _: section, text, count=1))
        print(f"{args.readme}: support matrix written from {args.results}")
        return 0
    current = pattern.search(text).group(0)
    if (
        current != section
        and "python38" in results
        and not results["python38"]
        and without_python38(current) == section
    ):
        # A machine without Python 3.8 (a user's fresh Debian 12) cannot run the README's Python 3.8 claims; all else
        # must still be what ran.
        print(
            f"{args.readme}: the support matrix is what `make matrix` just ran, but for its Python 3.8 claims, NOT "
            "checked here: this machine has no Python 3.8 (tests/lab/matrix/matrix.py, python38())"
        )
        return 0
    if current != section:
        print(
            f"{args.readme}'s support matrix is not what `make matrix` just ran. It ran:\n\n{section}", file=sys.stderr
        )
        print("Run `make support-matrix` to write that into the README (review it before committing).", file=sys.stderr)
        return 1
    print(f"{args.readme}: the support matrix is what `make matrix` ran")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run")
    run_parser.add_argument("--out", required=True)
    run_parser.add_argument("--tarball", required=True)
    run_parser.add_argument("--suites", nargs="+", required=True)
    run_parser.add_argument("--jobs", type=int, default=4)
    run_parser.add_argument("--only", help="run only the jobs whose title matches this regular expression")
    readme_parser = sub.add_parser("readme")
    mode = readme_parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--write", action="store_true")
    readme_parser.add_argument("results")
    readme_parser.add_argument("readme")
    args = parser.parse_args(argv)
    if args.command == "run":
        Path(args.out).mkdir(parents=True, exist_ok=True)
        return run(args)
    return readme(args)


if __name__ == "__main__":
    sys.exit(main())
