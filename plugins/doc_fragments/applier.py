# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""What the collection's applier modules share: one role in one step, checked first, changing only what differs."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  state:
    description:
      - V(present) checks, then applies. V(checked) only checks the input and what the host allows, and changes
        nothing (the site preflight runs it so, before any host changes).
    type: str
    choices: [present, checked]
    default: present
  root:
    description:
      - Directory that stands for C(/), for the files read and written (tests point it at a tree); commands that
        change the running system (modprobe, systemctl) run only when it is C(/).
    type: path
    default: /
  host:
    description: The inventory name, which starts every message.
    type: str
    default: ""
  header:
    description:
      - The comment block each file written starts with (the roles pass the variable C(ansible_managed), default
        C(Ansible managed), through the C(comment) filter).
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    details: Check mode reports the changes a run would make, each with its reason, and changes nothing.
  diff_mode:
    support: full
    details: A diff of each file written or removed.
"""
