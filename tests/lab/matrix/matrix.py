#!/usr/bin/env python3
"""The ansible-core version matrix (`make matrix`) and the README support matrix written from what it ran.

  matrix.py run --out DIR --tarball TARBALL --suites SUITE... --venv VENV [--venv VENV ...] [--jobs N]
  matrix.py readme (--check | --write) RESULTS_JSON README

`run` checks each venv's ansible-core against meta/runtime.yml (and that the oldest version it claims is among them),
then runs, per venv: the unit tests, Molecule's rdma_core scenario on each lab suite (containers named
rdma_core-<suite>-core<version>, apart from `make molecule`'s), and tests/lab/tarball-smoke/run.sh. It writes
RESULTS_JSON and fails when any run failed. `readme` renders the support matrix from RESULTS_JSON between the
markers in README; --check fails when the README says something else.
"""

import argparse
import json
import os
import platform
import re
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
SCENARIO = "rdma_core"
# Molecule's podman driver and connection need containers.podman besides the collection's own dependencies.
TOOL_COLLECTIONS = ["containers.podman"]
BEGIN = "<!-- support-matrix: written by `make support-matrix` from what `make matrix` ran; do not edit -->"
END = "<!-- end support-matrix -->"


def _venv_python(venv, code):
    return subprocess.run(
        [str(Path(venv) / "bin" / "python"), "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()


def _requires_ansible(runtime_yml):
    data = yaml.safe_load(Path(runtime_yml).read_text()) or {}
    return data.get("requires_ansible")


def _env(venv, **extra):
    env = dict(os.environ)
    env["PATH"] = f"{Path(venv) / 'bin'}:{env['PATH']}"
    env["ANSIBLE_COLLECTIONS_PATH"] = str(ROOT / ".build" / "collections")
    env["NO_COLOR"] = "1"  # plain logs; Molecule colours even when writing to a file
    env.update(extra)
    return env


def describe_venv(venv, claim):
    """ansible-core and Python of a venv, and the collections it brings; fails where they contradict a claim."""
    core = _venv_python(venv, "import ansible.release; print(ansible.release.__version__)")
    python = _venv_python(venv, "import platform; print(platform.python_version())")
    problems = []
    if Version(core) not in claim:
        problems.append(f"{venv}: ansible-core {core} is outside meta/runtime.yml's requires_ansible {claim}")
    listing = subprocess.run(
        [str(Path(venv) / "bin" / "ansible-galaxy"), "collection", "list", "--format", "json"],
        env=_env(venv),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = {}
    for path, collections in json.loads(listing).items():
        for fqcn, info in collections.items():
            found.setdefault(fqcn, (path, info["version"]))
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    collections = {}
    for fqcn in sorted(set(galaxy.get("dependencies") or {}) | set(TOOL_COLLECTIONS)):
        if fqcn not in found:
            problems.append(f"{venv}: collection {fqcn} is not installed")
            continue
        path, version = found[fqcn]
        requires = _requires_ansible(Path(path, *fqcn.split("."), "meta", "runtime.yml"))
        if requires and Version(core) not in SpecifierSet(requires):
            problems.append(f"{venv}: {fqcn} {version} requires ansible {requires}, not {core}")
        collections[fqcn] = version
    return {"core": core, "python": python, "venv": Path(venv).name, "collections": collections}, problems


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


class Job:
    def __init__(self, core, check, suites, command, env, log, after=None):
        self.core, self.check, self.suites = core, check, suites
        self.command, self.env, self.log, self.after = command, env, log, after

    @property
    def title(self):
        where = f" on {' '.join(self.suites)}" if self.suites else ""
        return f"{self.check} with ansible-core {self.core}{where}"

    def run(self):
        print(f"START {self.title}", flush=True)
        start = time.monotonic()
        with open(self.log, "w") as log:
            rc = subprocess.run(self.command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT).returncode
        detail, problem = {}, None
        if rc != 0:
            problem = f"exit status {rc}"
        elif self.after:
            detail, problem = self.after()
        seconds = round(time.monotonic() - start)
        if problem:
            tail = Path(self.log).read_text(errors="replace").splitlines()[-120:]
            print(f"FAIL  {self.title} ({seconds} s): {problem}; last lines of {self.log}:", flush=True)
            print("\n".join(tail), flush=True)
        else:
            print(f"PASS  {self.title} ({seconds} s)", flush=True)
        return {
            "core": self.core,
            "check": self.check,
            "suites": self.suites,
            "result": "failed" if problem else "passed",
            "problem": problem,
            "seconds": seconds,
            "detail": detail,
            "log": str(self.log),
        }


def _junit_counts(path):
    def check():
        root = ET.parse(path).getroot()
        suite = root if root.tag == "testsuite" else root.find("testsuite")
        counts = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
        counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
        problem = None
        if counts["failures"] or counts["errors"] or not counts["passed"]:
            problem = f"unit tests: {counts}"
        return counts, problem

    return check


def _molecule_used(log, core):
    def check():
        text = Path(log).read_text(errors="replace")
        # Recorded before the run: the ansible-core Molecule found (its first line of `molecule --version`).
        if not re.search(rf"^\s*ansible:{re.escape(core)}$", text, re.M):
            return {}, f"Molecule did not use ansible-core {core} (see `molecule --version` at the top of the log)"
        return {}, None

    return check


def _smoke_targets(out, core, suites):
    def check():
        targets = [json.loads(path.read_text()) for path in sorted(Path(out, "targets").glob("*.json"))]
        seen = sorted(target["suite"] for target in targets)
        if seen != sorted(suites) or any(target["ansible_core"] != core for target in targets):
            return {"targets": targets}, f"the smoke playbook did not report every suite on ansible-core {core}"
        return {"targets": targets}, None

    return check


def jobs_for(venv, core, suites, images, tarball, out):
    core_out = Path(out) / f"core-{core}"
    core_out.mkdir(parents=True, exist_ok=True)
    bin_dir = Path(venv) / "bin"
    jobs = []
    for suite in suites:
        log = core_out / f"molecule-{SCENARIO}-{suite}.log"
        command = [
            "/bin/bash",
            "-c",
            f'"{bin_dir}/molecule" --version && exec "{bin_dir}/molecule" test -s {SCENARIO}',
        ]
        env = _env(
            venv,
            MOLECULE_SUITE=f"{suite}-core{core}",
            MOLECULE_IMAGE=images[suite],
            MOLECULE_EPHEMERAL_DIRECTORY=str(
                ROOT / ".cache" / "molecule-matrix" / f"core-{core}" / f"{SCENARIO}-{suite}"
            ),
        )
        jobs.append(Job(core, f"molecule {SCENARIO}", [suite], command, env, log, _molecule_used(log, core)))
    smoke_out = core_out / "tarball-smoke"
    jobs.append(
        Job(
            core,
            "tarball smoke",
            list(suites),
            [
                str(ROOT / "tests" / "lab" / "tarball-smoke" / "run.sh"),
                str(venv),
                str(tarball),
                str(smoke_out),
                *suites,
            ],
            _env(venv),
            core_out / "tarball-smoke.log",
            _smoke_targets(smoke_out, core, suites),
        )
    )
    junit = core_out / "unit.xml"
    unit = [str(bin_dir / "pytest"), "tests/unit", "tests/repo", "-p", "no:cacheprovider", f"--junitxml={junit}"]
    jobs.append(Job(core, "unit tests", [], unit, _env(venv), core_out / "unit.log", _junit_counts(junit)))
    return jobs


def run(args):
    claim = SpecifierSet(_requires_ansible(ROOT / "meta" / "runtime.yml"))
    cores, problems = [], []
    for venv in args.venv:
        described, venv_problems = describe_venv(venv, claim)
        cores.append(described)
        problems += venv_problems
    tested = {Version(core["core"]) for core in cores}
    for spec in claim:
        if spec.operator == ">=" and Version(spec.version) not in tested:
            problems.append(f"meta/runtime.yml claims {spec}, but no venv given has ansible-core {spec.version}")
    if problems:
        raise SystemExit("matrix: " + "\n  ".join(["cannot run:", *problems]))
    images = {suite: lab_image(suite) for suite in args.suites}
    targets = {suite: describe_image(image) for suite, image in images.items()}
    jobs = []
    for venv, core in zip(args.venv, cores):
        jobs += jobs_for(venv, core["core"], args.suites, images, args.tarball, args.out)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        runs = list(pool.map(Job.run, jobs))
    os_release = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
    results = {
        "controller": {"os": os_release.get("PRETTY_NAME", "").strip('"'), "python": platform.python_version()},
        "requires_ansible": str(_requires_ansible(ROOT / "meta" / "runtime.yml")),
        "scenario": SCENARIO,
        "cores": cores,
        "targets": targets,
        "runs": runs,
    }
    Path(args.out, "results.json").write_text(json.dumps(results, indent=2) + "\n")
    failed = [job["core"] + ": " + job["check"] for job in runs if job["result"] != "passed"]
    print(f"matrix: {len(runs) - len(failed)} of {len(runs)} runs passed; results in {args.out}/results.json")
    return 1 if failed else 0


def _minor(version):
    return ".".join(version.split(".")[:2])


def render(results):
    """The README's support matrix section, from what ran (only runs that passed are claimed)."""
    targets = results["targets"]

    def target(suite):
        t = targets[suite]
        return f"{t['name']} {t['version']} ({t['codename']}), Python {_minor(t['python'])}"

    def newest_first(suites):
        return sorted(suites, key=lambda suite: Version(targets[suite]["version"]), reverse=True)

    lines = [
        BEGIN,
        f"`make matrix` (part of `make test`) ran these on a {results['controller']['os']} controller; "
        f'`meta/runtime.yml` claims `requires_ansible: "{results["requires_ansible"]}"`.',
        "",
        "| ansible-core | controller Python | unit tests (`tests/unit`, `tests/repo`) "
        f"| Molecule `{results['scenario']}` (converge, idempotence, verify) "
        "| built tarball installed into a clean path: FQCN roles, `gpucluster.fabric.rdma`, "
        "validation report in `./fabric-reports/` |",
        "|---|---|---|---|---|",
    ]
    for core in sorted(results["cores"], key=lambda c: Version(c["core"])):
        runs = [run for run in results["runs"] if run["core"] == core["core"] and run["result"] == "passed"]
        unit = [run for run in runs if run["check"] == "unit tests"]
        unit_text = "passed" if unit else "not run"
        if unit and unit[0]["detail"].get("skipped"):
            unit_text += f" ({unit[0]['detail']['skipped']} skipped)"
        molecule = newest_first(
            suite for run in runs if run["check"].startswith("molecule ") for suite in run["suites"]
        )
        smoke = newest_first(suite for run in runs if run["check"] == "tarball smoke" for suite in run["suites"])
        lines.append(
            f"| {core['core']} | {_minor(core['python'])} | {unit_text} "
            f"| {'<br>'.join(map(target, molecule)) or 'not run'} | {'<br>'.join(map(target, smoke)) or 'not run'} |"
        )
    collections = sorted(
        {f"{name} {version}" for core in results["cores"] for name, version in core["collections"].items()}
    )
    lines += ["", f"With the collections: {', '.join(collections)}.", END]
    return "\n".join(lines) + "\n"


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
    run_parser.add_argument("--venv", action="append", required=True)
    run_parser.add_argument("--jobs", type=int, default=4)
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
