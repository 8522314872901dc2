"""Run a module as Ansible runs it: a separate Python process, its arguments as JSON, its result read from stdout."""

import json
import os
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def run_module(name, tmp_path, check=False, diff=False, **args):
    """plugins/modules/<name>.py with ``args`` (check mode and diff mode as Ansible passes them); its JSON result."""
    args_file = tmp_path / f"{name}-args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": dict(args, _ansible_check_mode=check, _ansible_diff=diff)}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    module = os.path.join(REPO, "plugins", "modules", name + ".py")
    proc = subprocess.run(
        [sys.executable, module, str(args_file)], capture_output=True, text=True, env=env, check=False
    )
    return json.loads(proc.stdout)
