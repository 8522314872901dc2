# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The boot-time entry point of role roce_qos: ``/usr/bin/python3 roce_qos_boot.py <config.json> [wait seconds]``.

The systemd unit (and the udev rule, through it) runs this file; it applies the settings the role wrote with
roce_qos_apply.py, installed next to it: the very code module roce_qos runs. Outside Ansible there is no
AnsibleModule.run_command, so the commands run through subprocess here.
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import roce_qos_apply  # noqa: E402  (next to this file, on the host)


def run(argv):
    """(rc, stdout, stderr) of a command; 127 when the program is missing (``dcb`` before iproute2 5.11)."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        return 127, "", f"{argv[0]}: not found"
    return proc.returncode, proc.stdout, proc.stderr


if __name__ == "__main__":
    raise SystemExit(roce_qos_apply.main(sys.argv[1:], run))
