"""tools/jinja_logic.py finds long Jinja logic in YAML and leaves prose and templates alone."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("jinja_logic", ROOT / "tools" / "jinja_logic.py")
jinja_logic = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = jinja_logic
_spec.loader.exec_module(jinja_logic)


def _tree(tmp_path, text, name="roles/demo/tasks/main.yml"):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return tmp_path


def test_long_logic_is_found_with_its_line(tmp_path):
    logic = " + ".join(f"(demo_list_{i} | select('match', '^x') | list)" for i in range(6))
    root = _tree(tmp_path, f'---\n- name: Demo\n  ansible.builtin.debug:\n    msg: "{{{{ {logic} }}}}"\n')
    ((length, expression),) = jinja_logic.long_logic(root)
    assert length > 200 and expression.line == 4 and str(expression.path) == "roles/demo/tasks/main.yml"
    assert jinja_logic.main([str(root)]) == 1


def test_long_conditionals_count_whole(tmp_path):
    condition = " and ".join(f"demo_value_{i} | int > {i}" for i in range(12))
    root = _tree(tmp_path, f"---\n- name: Demo\n  ansible.builtin.debug:\n  when: {condition}\n")
    assert len(jinja_logic.long_logic(root)) == 1


def test_prose_with_short_interpolations_and_templates_pass(tmp_path):
    prose = "The host " + " and ".join(f"{{{{ demo_{i} }}}}" for i in range(5)) + " " + "words " * 60
    root = _tree(tmp_path, f'---\n- name: Demo\n  ansible.builtin.fail:\n    msg: "{prose}"\n')
    _tree(
        root,
        "{% for x in y %}" + "{{ x | something_long_enough }}" * 20 + "{% endfor %}\n",
        "roles/demo/templates/t.j2",
    )
    assert jinja_logic.long_logic(root) == []
    assert jinja_logic.main([str(root)]) == 0


def test_the_collection_has_no_jinja_logic_over_the_limit():
    found = jinja_logic.long_logic(ROOT)
    assert not found, [f"{e.path}:{e.line}: {length}" for length, e in found]
