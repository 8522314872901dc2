"""fabric_validate's recorded command output, rendered by Ansible's own templar as the role renders it.

Seen in the kernel lab (first run against a real RDMA device): inside a folded (>-) YAML scalar a Jinja '\\n' stayed a
backslash and an n, so every perftest output in the report ended in a literal "\\n" and stderr was glued onto the last
line of stdout (where a result row would no longer parse).
"""

from pathlib import Path

import pytest
import yaml

ROLE = Path(__file__).resolve().parents[2] / "roles" / "fabric_validate"
template = pytest.importorskip("ansible.template")
pytestmark = pytest.mark.usefixtures("collection_loader")


def _render(expression, variables):
    from ansible.parsing.dataloader import DataLoader

    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    templar = template.Templar(loader=DataLoader(), variables={**role_vars, **variables})
    return templar.template(template.trust_as_template(expression))


def _trusted(value):
    """Task vars as Ansible loads them from the role: templates, rendered where they are used."""
    if isinstance(value, dict):
        return {name: _trusted(item) for name, item in value.items()}
    return template.trust_as_template(value) if isinstance(value, str) else value


def _task(tasks_file, task_name):
    tasks = yaml.safe_load((ROLE / "tasks" / tasks_file).read_text())
    return next(t for t in tasks if t["name"] == task_name)


# __fabric_validate_json: the slurp of the client's JSON report, skipped where perftest writes none.
COMMON = {
    "__fabric_validate_test": "ib_write_bw",
    "ansible_check_mode": False,
    "__fabric_validate_json": {"skipped": True},
}
RECORD = "Record the client's and the server's results"
OUTPUT = {"stdout": "65536 1000 0.02 0.01 0.00", "stderr": "warning", "rc": 0}
PAIR = {"server": "vm2", "client": "vm1"}
SKIPPED = {"skipped": True}


@pytest.mark.parametrize(
    ("variables", "key", "other"),
    [
        (
            {
                "__fabric_validate_part": {"serve": [], "connect": [PAIR], "live": True},
                "__fabric_validate_client": OUTPUT,
                "__fabric_validate_server_job": SKIPPED,
                "__fabric_validate_server": SKIPPED,
            },
            "rdma",
            "rdma_served",
        ),
        (
            {
                "__fabric_validate_part": {"serve": [PAIR], "connect": [], "live": True},
                "__fabric_validate_client": SKIPPED,
                "__fabric_validate_server_job": {"ansible_job_id": "j1"},
                "__fabric_validate_server": OUTPUT,
            },
            "rdma_served",
            "rdma",
        ),
    ],
)
def test_rdma_output_joins_stdout_and_stderr_with_a_real_newline(variables, key, other):
    task = _task("rdma_round.yml", RECORD)
    host = {"rdma": [], "rdma_served": []}
    rendered = _render(
        task["ansible.builtin.set_fact"]["__fabric_validate_host"],
        {**COMMON, **_trusted(task["vars"]), **variables, "__fabric_validate_host": host},
    )
    assert rendered[key][0]["output"] == "65536 1000 0.02 0.01 0.00\nwarning"
    assert rendered[key][0]["rc"] == 0
    # A host is client or server in a round, never both: the other list stays as it was.
    assert rendered[other] == []


def test_no_escaped_newline_in_folded_expressions():
    for path in (ROLE / "tasks").glob("*.yml"):
        assert "~ '\\n' ~" not in path.read_text(), f"{path.name}: use __fabric_validate_newline"


def test_rdma_record_keeps_the_slurped_json_report():
    import base64

    task = _task("rdma_round.yml", RECORD)
    report = '{\n"test_info": {\n"test": "RDMA_Write_BW_Test"\n},\n"results": {\n"MsgSize": 65536\n}\n}\n'
    variables = {
        "__fabric_validate_part": {"serve": [], "connect": [PAIR], "live": True},
        "__fabric_validate_client": OUTPUT,
        "__fabric_validate_server_job": SKIPPED,
        "__fabric_validate_server": SKIPPED,
        "__fabric_validate_json": {"content": base64.b64encode(report.encode()).decode(), "encoding": "base64"},
    }
    rendered = _render(
        task["ansible.builtin.set_fact"]["__fabric_validate_host"],
        {**COMMON, **_trusted(task["vars"]), **variables, "__fabric_validate_host": {"rdma": []}},
    )
    assert rendered["rdma"][0]["json"] == report
    assert (
        "json"
        not in _render(
            task["ansible.builtin.set_fact"]["__fabric_validate_host"],
            {
                **COMMON,
                **_trusted(task["vars"]),
                **variables,
                "__fabric_validate_json": SKIPPED,
                "__fabric_validate_host": {},
            },
        )["rdma"][0]
    )
