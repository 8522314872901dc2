"""The README support matrix claims only what `make matrix` ran and passed (tests/lab/matrix/matrix.py)."""

import copy
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]  # repository-level test: tests/lab is not shipped
_spec = importlib.util.spec_from_file_location("matrix", ROOT / "tests" / "lab" / "matrix" / "matrix.py")
matrix = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(matrix)

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


RESULTS = {
    "controller": {"os": "Debian GNU/Linux 12 (bookworm)", "python": "3.11.7"},
    "requires_ansible": ">=2.19.0,<2.20.0",
    "scenario": "rdma_core",
    "cores": [
        {"core": "2.19.14", "python": "3.11.7", "collections": {"ansible.posix": "2.1.0"}},
        {"core": "2.19.0", "python": "3.11.7", "collections": {"ansible.posix": "2.1.0"}},
    ],
    "targets": {"bullseye": BULLSEYE, "bookworm": BOOKWORM},
    "runs": [
        _run("2.19.0", "unit tests", [], passed=406, skipped=0),
        _run("2.19.0", "molecule rdma_core", ["bullseye"]),
        _run("2.19.0", "molecule rdma_core", ["bookworm"], result="failed"),
        _run("2.19.0", "tarball smoke", ["bookworm", "bullseye"]),
        _run("2.19.14", "unit tests", [], passed=400, skipped=6),
    ],
}


def _rows(section):
    return {line.split("|")[1].strip(): line for line in section.splitlines() if line.startswith("| 2.")}


def test_rows_oldest_first_and_only_passed_runs_claimed():
    rows = _rows(matrix.render(RESULTS))
    assert list(rows) == ["2.19.0", "2.19.14"]
    molecule_cell = rows["2.19.0"].split("|")[4]
    assert "bullseye" in molecule_cell
    assert "bookworm" not in molecule_cell  # that run failed
    assert "Debian GNU/Linux 12 (bookworm), Python 3.11<br>Debian GNU/Linux 11 (bullseye)" in rows["2.19.0"]
    assert rows["2.19.14"].split("|")[3].strip() == "passed (6 skipped)"
    assert rows["2.19.14"].count("not run") == 2


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
    readme.write_text(readme.read_text().replace("2.19.0 | 3.11", "2.18.0 | 3.11"))
    assert matrix.main(["readme", "--check", str(results), str(readme)]) == 1


def test_write_refuses_failed_results(tmp_path):
    results = tmp_path / "results.json"
    results.write_text(matrix.json.dumps(RESULTS))
    readme = _readme(tmp_path, f"{matrix.BEGIN}\n{matrix.END}\n")
    with pytest.raises(SystemExit, match="failed"):
        matrix.main(["readme", "--write", str(results), str(readme)])
