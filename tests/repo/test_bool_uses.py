"""Every boolean switch is read through `| bool`, so the strings "true"/"false" (-e, AWX surveys) work like booleans.

The checker is tools/bool_uses.py; the runtime side (ansible-core evaluating the conditions) is test_bool_runtime.py.
"""

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]  # repository-level test: tools/ is not shipped
_spec = importlib.util.spec_from_file_location("bool_uses", ROOT / "tools" / "bool_uses.py")
bool_uses = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bool_uses  # dataclasses look their module up there
_spec.loader.exec_module(bool_uses)

NAMES, ATTRS = bool_uses.boolean_variables(ROOT)


def test_boolean_variables_found():
    # One per role at least, the play-level switch of preflight.yml and the partitions' suboption.
    for name in (
        "cuda_repo_verify_signature",
        "fabric_interfaces_neigh_tuning",
        "fabric_validate_fail_on_failure",
        "nccl_allow_version_change",
        "opensm_restart_ok",
        "rdma_core_memlock_pam",
        "rdma_modules_runtime_load",
        "gpucluster_site_preflight",
    ):
        assert name in NAMES
    assert "ipoib" in ATTRS
    assert len(NAMES) >= 20


def test_every_expression_parses():
    found, unparsed = bool_uses.bare_uses(ROOT)
    assert unparsed == []


def test_no_bare_boolean_use():
    found, _ = bool_uses.bare_uses(ROOT)
    assert not found, "boolean switches used without | bool (a string 'false' is truthy):\n" + "\n".join(
        str(use) for use in found
    )


def test_expressions_seen_in_every_kind_of_file():
    seen = list(bool_uses.expressions(ROOT))
    conditionals = [e for e in seen if e.conditional]
    # fewer as rules move from YAML into the appliers (plugins/modules), but still every kind of file
    assert len(conditionals) > 40
    assert any(e.style == "j2" for e in seen)
    assert any(str(e.path).startswith("playbooks/") for e in seen)
    assert any("/handlers/" in str(e.path) for e in conditionals)


def _bare(expression, conditional=True):
    tree = bool_uses.Expression(Path("x.yml"), 1, 1, expression, conditional).parse()
    return [name for name, _ in bool_uses.bare_uses_in_tree(tree, {"sw", "other_sw"}, {"ipoib"})]


@pytest.mark.parametrize(
    "expression",
    [
        "sw",
        "not sw",
        "sw and x | length > 0",
        "x or sw",
        "sw | default(false)",
        "sw == true",
        "sw | string | bool",
        "{{ 'a' if sw else 'b' }}",
        "{% if sw %}on{% endif %}",
        "{{ sw }}",
        "part.ipoib",
        "part['ipoib']",
        "parts | selectattr('name', 'eq', 'x') | first | attr('y') and part.ipoib",
    ],
)
def test_bare_use_is_found(expression):
    assert len(_bare(expression, conditional="{" not in expression)) == 1


@pytest.mark.parametrize(
    "expression",
    [
        "sw | bool",
        "sw | ansible.builtin.bool",
        "not (sw | bool)",
        "not sw | bool",
        "sw | bool and x | length > 0",
        "(sw | default(false)) | bool",
        "sw | default(false) | bool",
        "sw is none",
        "sw is not none",
        "sw is defined and sw | bool",
        "x.sw",
        "'sw'",
        "part.ipoib | bool",
        "{{ 'a' if sw | bool else 'b' }}",
        "{% if sw | bool %}on{% endif %}",
        "{%- set out = {} -%}{%- if sw | bool and x | int > 0 -%}{%- endif -%}{{ out }}",
    ],
)
def test_filtered_use_passes(expression):
    assert _bare(expression, conditional="{" not in expression) == []


def test_both_switches_of_one_expression_reported():
    assert sorted(_bare("sw and not other_sw")) == ["other_sw", "sw"]
    assert _bare("sw | bool and not other_sw") == ["other_sw"]


def test_reports_file_line_and_variable(tmp_path):
    role = tmp_path / "roles" / "demo"
    for folder in ("defaults", "meta", "tasks", "templates", "vars"):
        (role / folder).mkdir(parents=True)
    (role / "meta" / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    options:\n      demo_on: {type: bool, default: true, description: a}\n"
    )
    (role / "defaults" / "main.yml").write_text("demo_on: true\ndemo_extra: false\n")
    (role / "tasks" / "main.yml").write_text(
        textwrap.dedent(
            """\
            - name: Bare
              ansible.builtin.debug:
                msg: hi
              when: demo_on
            - name: Filtered
              ansible.builtin.assert:
                that:
                  - demo_on | bool
                  - not demo_extra
            - name: Folded
              ansible.builtin.set_fact:
                x: >-
                  {{ 'demo_on' ~ 'a'
                     if demo_on else 'b' }}
            """
        )
    )
    (role / "vars" / "main.yml").write_text('__demo_x: "{{ demo_extra | default(false) | bool }}"\n')
    (role / "templates" / "demo.j2").write_text("line\n{% if demo_on | bool %}a{% endif %}\n{{ 'x' if demo_on }}\n")
    found, unparsed = bool_uses.bare_uses(tmp_path)
    assert unparsed == []
    assert sorted(f"{use.path}:{use.line}:{use.name}" for use in found) == [
        "roles/demo/tasks/main.yml:14:demo_on",
        "roles/demo/tasks/main.yml:4:demo_on",
        "roles/demo/tasks/main.yml:9:demo_extra",
        "roles/demo/templates/demo.j2:3:demo_on",
    ]
    assert bool_uses.main(["bool_uses.py", str(tmp_path)]) == 1


def test_syntax_error_is_reported(tmp_path):
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "bad.yml").write_text(
        "- hosts: all\n  tasks:\n    - ansible.builtin.ping:\n      when: a ==\n"
    )
    found, unparsed = bool_uses.bare_uses(tmp_path, {"a"}, set())
    assert len(unparsed) == 1
    assert unparsed[0].startswith("playbooks/bad.yml:4: does not parse")
