"""tests/lab/why-failed.sh: the end of `make test`'s output names why a run failed, from the run's own log."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "lab" / "why-failed.sh"


def why(tmp_path, log_text):
    log = tmp_path / "run.log"
    log.write_text(log_text)
    out = tmp_path / "failures.txt"
    subprocess.run(
        ["sh", str(SCRIPT), "kernel lab (reduced) -s kernel_softroce", str(log)],
        env={"PATH": "/usr/bin:/bin", "GPUCLUSTER_FAILURES": str(out)},
        check=True,
    )
    return out.read_text().splitlines()


def test_the_fatal_line_of_a_molecule_log_is_kept_without_colour(tmp_path):
    # molecule's rich output frames each Ansible line in a coloured bar.
    lines = why(
        tmp_path,
        "TASK [Boot]\n\x1b[2m│\x1b[0m ok: [vm1]\n"
        '\x1b[2m│\x1b[0m fatal: [vm1]: FAILED! => {"msg": "ib_write_bw: client rc=124"}\n'
        "\x1b[2m│\x1b[0m PLAY RECAP\n",
    )
    assert lines[0] == f"FAIL  kernel lab (reduced) -s kernel_softroce (log: {tmp_path / 'run.log'})"
    assert lines[1:] == ['      │ fatal: [vm1]: FAILED! => {"msg": "ib_write_bw: client rc=124"}']


def test_only_the_last_eight_reasons_and_each_cut_to_400_characters(tmp_path):
    text = "".join(f"failed: [gpu-{i:02d}] {'x' * 500}\n" for i in range(12))
    lines = why(tmp_path, text)
    assert len(lines) == 9
    assert lines[1].startswith("      failed: [gpu-04]")
    assert all(len(line) == 406 for line in lines[1:])


def test_a_missing_log_says_so(tmp_path):
    out = tmp_path / "failures.txt"
    subprocess.run(
        ["sh", str(SCRIPT), "matrix job", str(tmp_path / "absent.log")],
        env={"PATH": "/usr/bin:/bin", "GPUCLUSTER_FAILURES": str(out)},
        check=True,
    )
    assert out.read_text().splitlines()[1] == "      (no log)"
