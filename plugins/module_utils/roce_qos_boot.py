# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The boot-time entry point of role roce_qos: ``/usr/bin/python3 roce_qos_boot.py <config.json> [wait seconds]``.

Module roce_qos (option persist) installs this file beside roce_qos_apply.py, each as its source here
(inspect.getsource: the code the module itself ran), and the systemd unit (and the udev rule, through it) runs it: it
applies the settings the module wrote with roce_qos_apply.py. Outside Ansible there is no AnsibleModule.run_command,
so the commands run through subprocess here, each bounded. Standard library only (Python 3.8 targets).
"""

import importlib
import os
import subprocess
import sys

COMMAND_TIMEOUT = 30  # seconds for one dcb, ip or configfs command at boot


def run(argv):
    """(rc, stdout, stderr) of a command; 127 when the program is missing (``dcb`` before iproute2 5.11), 124 when it
    did not end within COMMAND_TIMEOUT (killed)."""
    try:
        # At boot, without Ansible (systemd's unit, udev): no AnsibleModule.run_command.
        proc = subprocess.Popen(  # pylint: disable=ansible-bad-function
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    except FileNotFoundError:
        return 127, "", f"{argv[0]}: not found"
    try:
        out, err = proc.communicate(timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate(timeout=5)  # what the killed command wrote; SIGKILL ends it
        return 124, "", f"{argv[0]}: no answer within {COMMAND_TIMEOUT} s (killed)"
    return proc.returncode, out, err


def main(argv):
    """Apply the settings file ``argv[0]`` with roce_qos_apply.py, which lies beside this file on the host."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    return importlib.import_module("roce_qos_apply").main(argv, run)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
