"""fabric_validate's recorded command output, rendered by Ansible's own templar as the role renders it.

Seen in the kernel lab (first run against a real RDMA device): inside a folded (>-) YAML scalar a Jinja '\\n' stayed a
backslash and an n, so every perftest output in the report ended in a literal "\\n" and stderr was glued onto the last
line of stdout (where a result row would no longer parse).
"""

from pathlib import Path

import pytest
import yaml

ROLE = Path(__file__).resolve().parents[3] / "roles" / "fabric_validate"
template = pytest.importorskip("ansible.template")


def _render(expression, variables):
    from ansible.parsing.dataloader import DataLoader

    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    templar = template.Templar(loader=DataLoader(), variables={**role_vars, **variables})
    return templar.template(template.trust_as_template(expression))


def _set_fact(tasks_file, task_name, variable):
    tasks = yaml.safe_load((ROLE / "tasks" / tasks_file).read_text())
    task = next(t for t in tasks if t["name"] == task_name)
    return task["ansible.builtin.set_fact"][variable]


COMMON = {"__fabric_validate_test": "ib_write_bw", "ansible_check_mode": False}


@pytest.mark.parametrize(
    ("task_name", "variables", "key"),
    [
        (
            "Record the client's result (the judged side)",
            {"__fabric_validate_connect": [{"server": "vm2"}], "__fabric_validate_client": {}},
            "rdma",
        ),
        (
            "Record the server's part",
            {"__fabric_validate_serve": [{"client": "vm1"}], "__fabric_validate_server": {}},
            "rdma_served",
        ),
    ],
)
def test_rdma_output_joins_stdout_and_stderr_with_a_real_newline(task_name, variables, key):
    result_var = "__fabric_validate_client" if "__fabric_validate_client" in variables else "__fabric_validate_server"
    variables[result_var] = {"stdout": "65536 1000 0.02 0.01 0.00", "stderr": "warning", "rc": 0}
    host = {"rdma": [], "rdma_served": []}
    rendered = _render(
        _set_fact("rdma_round.yml", task_name, "__fabric_validate_host"),
        {**COMMON, **variables, "__fabric_validate_host": host},
    )
    assert rendered[key][0]["output"] == "65536 1000 0.02 0.01 0.00\nwarning"
    assert rendered[key][0]["rc"] == 0


def test_no_escaped_newline_in_folded_expressions():
    for path in (ROLE / "tasks").glob("*.yml"):
        assert "~ '\\n' ~" not in path.read_text(), f"{path.name}: use __fabric_validate_newline"
