"""The README support matrix claims only what `make matrix` ran and passed (tests/lab/matrix/matrix.py)."""

import copy
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]  # repository-level test: tests/lab is not shipped
_spec = importlib.util.spec_from_file_location("matrix", ROOT / "tests" / "lab" / "matrix" / "matrix.py")
matrix = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(matrix)


@pytest.fixture(autouse=True)
def _own_failures_file(tmp_path, monkeypatch):
    """A job these tests make fail writes its reason with tests/lab/why-failed.sh: to a file of the test's own, not
    the checkout's .build/test-failures.txt, which `make test` prints when a run fails."""
    monkeypatch.setenv("GPUCLUSTER_FAILURES", str(tmp_path / "test-failures.txt"))


BOOKWORM = {
    "image": "x:bookworm-1",
    "name": "Debian GNU/Linux",
    "version": "12",
    "codename": "bookworm",
    "python": "3.11.2",
}
BULLSEYE = {
    "image": "x:bullseye-1",
    "name": "Debian GNU/Linux",
    "version": "11",
    "codename": "bullseye",
    "python": "3.9.2",
}


def _run(core, check, suites, result="passed", **detail):
    return {"core": core, "check": check, "suites": suites, "result": result, "detail": detail}


def _core(core, python, controller):
    where = "Debian trixie container" if controller == "trixie" else "this machine"
    return {
        "core": core,
        "python": python,
        "controller": controller,
        "controller_text": f"{where}, Python {python[:4]}",
        "collections": {"ansible.posix": "2.1.0"},
    }


RESULTS = {
    "controller": {"os": "Debian GNU/Linux 12 (bookworm)", "python": "3.11.7"},
    "requires_ansible": ">=2.19.0",
    "cores": [
        _core("2.21.5", "3.13.5", "trixie"),
        _core("2.19.0", "3.11.7", "host"),
        _core("2.20.10", "3.13.5", "trixie"),
    ],
    "targets": {
        "bullseye": BULLSEYE,
        "bookworm": BOOKWORM,
        "bookworm-python3.8": dict(BOOKWORM, python="3.8.18", interpreter="/opt/python3.8"),
    },
    "runs": [
        _run("2.19.0", "unit tests", [], passed=380, skipped=0, playbook_tests=False),
        _run("2.19.0", "ansible-test sanity", [], pythons=["3.8"], tests=["compile", "import"]),
        _run("2.19.0", "tarball smoke", ["bookworm", "bullseye", "bookworm-python3.8"]),
        _run("2.20.10", "unit tests", [], passed=374, skipped=6, playbook_tests=False),
        _run("2.20.10", "ansible-test sanity", [], result="failed"),
        _run("2.20.10", "tarball smoke", ["bookworm", "bullseye"]),
        _run("2.20.10", "scenario site: converge, idempotence", ["bookworm"]),
        _run("2.21.5", "unit tests", [], passed=406, skipped=0, playbook_tests=True),
        _run("2.21.5", "ansible-test sanity", [], pythons=["3.13"]),
        _run("2.21.5", "tarball smoke", ["bookworm", "bullseye"], result="failed"),
        _run("2.21.5", "scenario site", ["bullseye"]),
    ],
}


def _rows(section):
    return {
        line.split("|")[1].strip(): line.split("|")[2:-1] for line in section.splitlines() if line.startswith("| 2.")
    }


def test_rows_oldest_first_and_only_passed_runs_claimed():
    rows = _rows(matrix.render(RESULTS))
    assert list(rows) == ["2.19.0", "2.20.10", "2.21.5"]
    controller, unit, sanity, smoke, site = (cell.strip() for cell in rows["2.19.0"])
    assert controller == "this machine, Python 3.11"
    assert (unit, sanity, site) == ("passed (not the `playbook` ones)", "Python 3.8 (compile, import)", "not run")
    assert smoke == (
        "Debian GNU/Linux 12 (bookworm), Python 3.11<br>Debian GNU/Linux 12 (bookworm), Python 3.8"
        "<br>Debian GNU/Linux 11 (bullseye), Python 3.9"
    )
    controller, unit, sanity, smoke, site = (cell.strip() for cell in rows["2.20.10"])
    assert controller == "Debian trixie container, Python 3.13"
    assert unit == "passed (not the `playbook` ones, 6 skipped)"
    assert sanity == "not run"  # that run failed
    assert site == "converge, idempotence: Debian GNU/Linux 12 (bookworm), Python 3.11"
    controller, unit, sanity, smoke, site = (cell.strip() for cell in rows["2.21.5"])
    assert unit == "passed"
    assert smoke == "not run"  # that run failed
    assert site == "every step, the fault tests included: Debian GNU/Linux 11 (bullseye), Python 3.9"


def _junit(tmp_path, cases):
    body = "".join(
        f'<testcase classname="{name}" name="t{n}">{"<failure/>" if failed else ""}</testcase>'
        for n, (name, failed) in enumerate(cases)
    )
    failures = sum(failed for _, failed in cases)
    path = tmp_path / "unit.xml"
    path.write_text(
        f'<testsuites><testsuite tests="{len(cases)}" failures="{failures}" errors="0" skipped="0">{body}'
        "</testsuite></testsuites>"
    )
    return path


def test_the_playbook_tests_ran_on_the_newest_release_only(tmp_path):
    action = "tests.unit.plugins.action.test_preflight_playbook"
    other = "tests.unit.plugins.module_utils.test_fabric_mtu"
    both = _junit(tmp_path, [(action, False), (other, False)])
    assert matrix._junit_counts(both, True)()[1] is None
    assert "ran where they were deselected" in matrix._junit_counts(both, False)()[1]
    without = _junit(tmp_path, [(other, False)])
    assert matrix._junit_counts(without, False)()[1] is None
    assert "no test of tests/unit/plugins/action ran" in matrix._junit_counts(without, True)()[1]
    failed = _junit(tmp_path, [(action, True), (other, False)])
    assert "'failures': 1" in matrix._junit_counts(failed, True)()[1]


def test_every_release_names_its_collections():
    section = matrix.render(RESULTS)
    assert [line for line in section.splitlines() if line.startswith("- 2.")] == [
        "- 2.19.0 with ansible.posix 2.1.0.",
        "- 2.20.10 with ansible.posix 2.1.0.",
        "- 2.21.5 with ansible.posix 2.1.0.",
    ]


def test_deprecation_warnings_are_found():
    text = "ok\n[DEPRECATION WARNING]: INJECT_FACTS_AS_VARS default to `True` is deprecated\nok\n"
    assert matrix.deprecations(text) == ["[DEPRECATION WARNING]: INJECT_FACTS_AS_VARS default to `True` is deprecated"]
    assert matrix.deprecations("[WARNING]: something else\n") == []
    unsupported = "[WARNING]: Collection gpucluster.fabric does not support Ansible version 2.20.10"
    assert matrix.deprecations(f"ok\n{unsupported}\n") == [unsupported]


def test_the_locks_say_where_each_release_runs(tmp_path):
    assert matrix.locks()  # the repository's own
    for version, controller in matrix.locks().items():
        assert controller in ("host", "trixie"), version
    (tmp_path / "core-2.20.1.txt").write_text("# matrix-controller: trixie\nansible-core==2.20.1\n")
    (tmp_path / "core-2.19.2.txt").write_text("# matrix-controller: host\nansible-core==2.19.2\n")
    assert list(matrix.locks(tmp_path).items()) == [("2.19.2", "host"), ("2.20.1", "trixie")]
    (tmp_path / "core-2.21.0.txt").write_text("ansible-core==2.21.0\n")
    with pytest.raises(SystemExit, match="matrix-controller"):
        matrix.locks(tmp_path)


def test_every_lock_pins_its_own_ansible_core():
    for version in matrix.locks():
        lock = (ROOT / "tests" / "lab" / "matrix" / f"core-{version}.txt").read_text()
        assert f"\nansible-core=={version}\n" in lock, version


def _readme(tmp_path, section):
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{section}\nafter\n")
    return readme


def test_check_passes_on_what_ran_and_fails_on_anything_else(tmp_path):
    passed = copy.deepcopy(RESULTS)
    passed["runs"] = [run for run in passed["runs"] if run["result"] == "passed"]
    results = tmp_path / "results.json"
    results.write_text(matrix.json.dumps(passed))
    readme = _readme(tmp_path, f"{matrix.BEGIN}\n{matrix.END}\n")
    assert matrix.main(["readme", "--check", str(results), str(readme)]) == 1
    assert matrix.main(["readme", "--write", str(results), str(readme)]) == 0
    assert matrix.main(["readme", "--check", str(results), str(readme)]) == 0
    assert readme.read_text().endswith("after\n")
    readme.write_text(readme.read_text().replace("| 2.19.0 |", "| 2.18.0 |"))
    assert matrix.main(["readme", "--check", str(results), str(readme)]) == 1


def test_write_refuses_failed_results(tmp_path):
    results = tmp_path / "results.json"
    results.write_text(matrix.json.dumps(RESULTS))
    readme = _readme(tmp_path, f"{matrix.BEGIN}\n{matrix.END}\n")
    with pytest.raises(SystemExit, match="failed"):
        matrix.main(["readme", "--write", str(results), str(readme)])


def test_every_release_has_its_sanity_ignores():
    """ansible-test reads tests/sanity/ignore-<major>.<minor>.txt of its own release only: every release the matrix
    runs needs one. Each holds the oldest release's entries (the reasons are the collection's); a newer release may add
    what its new checks find, and ansible-test fails on an entry its release does not need."""
    ignores = {}
    for version in matrix.locks():
        minor = ".".join(version.split(".")[:2])
        path = ROOT / "tests" / "sanity" / f"ignore-{minor}.txt"
        assert path.is_file(), f"ansible-core {version} runs ansible-test sanity: add {path.relative_to(ROOT)}"
        ignores[minor] = set(path.read_text().splitlines())
    oldest = ignores[min(ignores, key=lambda minor: tuple(map(int, minor.split("."))))]
    for minor, lines in ignores.items():
        assert oldest <= lines, f"ignore-{minor}.txt lacks {sorted(oldest - lines)}"


def test_a_machine_without_python38_checks_everything_but_the_python38_claims(tmp_path):
    with_py38 = copy.deepcopy(RESULTS)
    with_py38["runs"] = [run for run in with_py38["runs"] if run["result"] == "passed"]
    with_py38["python38"] = "/opt/python3.8/bin/python3.8"
    results = tmp_path / "results.json"
    results.write_text(matrix.json.dumps(with_py38))
    readme = _readme(tmp_path, f"{matrix.BEGIN}\n{matrix.END}\n")
    assert matrix.main(["readme", "--write", str(results), str(readme)]) == 0
    # The same runs on a machine without Python 3.8: neither the 3.8 target nor the 3.8 sanity tests ran.
    without = copy.deepcopy(with_py38)
    without["python38"] = None
    without["targets"].pop("bookworm-python3.8")
    for run in without["runs"]:
        run["suites"] = [suite for suite in run["suites"] if suite != "bookworm-python3.8"]
    without["runs"] = [run for run in without["runs"] if not (run["core"] == "2.19.0" and "sanity" in run["check"])]
    results.write_text(matrix.json.dumps(without))
    assert matrix.without_python38(matrix.render(with_py38)) == matrix.render(without)
    assert matrix.main(["readme", "--check", str(results), str(readme)]) == 0
    # Any other difference still fails there.
    readme.write_text(readme.read_text().replace("| 2.19.0 |", "| 2.18.0 |"))
    assert matrix.main(["readme", "--check", str(results), str(readme)]) == 1
    # And a machine with Python 3.8 must have run those claims.
    readme.write_text(readme.read_text().replace("| 2.18.0 |", "| 2.19.0 |"))
    without["python38"] = "/opt/python3.8/bin/python3.8"
    results.write_text(matrix.json.dumps(without))
    assert matrix.main(["readme", "--check", str(results), str(readme)]) == 1


def test_a_job_whose_results_thread_dies_is_run_once_more(tmp_path, monkeypatch, capsys):
    """ansible-core's results thread can die (ansible/ansible#85879) and leave ansible-playbook waiting for ever: the
    job is stopped and run once more from the start; a second death fails it; a hang of another kind times out."""
    marker = tmp_path / "attempts"
    # prints the traceback's first line, then hangs, on the first attempt only (or on every one)
    script = (
        "import pathlib, sys, time\n"
        f"p = pathlib.Path({str(marker)!r}); n = int(p.read_text()) + 1 if p.exists() else 1; p.write_text(str(n))\n"
        "if n == 1 or sys.argv[1] == 'always':\n"
        "    print('Exception in thread Thread-3 (results_thread_main):', flush=True); time.sleep(600)\n"
        "print('ok')\n"
    )
    monkeypatch.setattr(matrix, "POLL_SECONDS", 0.2)

    def job(mode):
        marker.unlink(missing_ok=True)
        return matrix.Job("2.19.0", "unit tests", [], [sys.executable, "-c", script, mode], None, tmp_path / "u.log")

    passed = job("once").run()
    assert passed["result"] == "passed" and passed["retried"].startswith("ansible-core's results thread died")
    assert marker.read_text() == "2" and (tmp_path / "u.log.first-attempt").exists()
    assert "RETRY unit tests with ansible-core 2.19.0" in capsys.readouterr().out
    failed = job("always").run()
    assert failed["result"] == "failed" and "died twice" in failed["problem"]
    monkeypatch.setattr(matrix, "JOB_TIMEOUT", 3)
    hung = matrix.Job(
        "2.19.0", "unit tests", [], [sys.executable, "-c", "import time; time.sleep(600)"], None, tmp_path / "h.log"
    )
    assert hung.run()["problem"] == "still running after 3 s"
