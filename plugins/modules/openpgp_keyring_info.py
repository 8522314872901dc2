#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)


DOCUMENTATION = r"""
---
module: openpgp_keyring_info
short_description: Read the key fingerprints of an OpenPGP public keyring
description:
  - Parses a binary or ASCII-armored OpenPGP keyring file (such as an apt C(signed-by) keyring) on the target and
    returns the fingerprints of its primary keys and subkeys. Needs no gpg binary. Never changes anything.
version_added: 0.1.0
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.info_module
  - gpucluster.fabric.attributes.posix
options:
  path:
    description: Keyring file on the target.
    type: path
    required: true
"""

EXAMPLES = r"""
- name: Read the CUDA repository keyring
  gpucluster.fabric.openpgp_keyring_info:
    path: /usr/share/keyrings/cuda-archive-keyring.gpg
  register: cuda_keyring
"""

RETURN = r"""
fingerprints:
  description: Fingerprints of the primary keys, upper-case hex, in file order.
  returned: success
  type: list
  elements: str
  sample: [EB693B3035CD5710E231E123A4B469963BF863CC]
primary_keys:
  description: One entry per primary key, with its packet version and subkey fingerprints.
  returned: success
  type: list
  elements: dict
  sample: [{fingerprint: EB693B3035CD5710E231E123A4B469963BF863CC, version: 4, subkeys: []}]
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.openpgp import OpenPGPError, keyring_info  # noqa: E402


def build_module():
    return AnsibleModule(argument_spec={"path": {"type": "path", "required": True}}, supports_check_mode=True)


def main():
    module = build_module()
    path = module.params["path"]
    try:
        with open(path, "rb") as handle:
            info = keyring_info(handle.read())
    except OSError as exc:
        module.fail_json(msg=f"cannot read keyring {path}: {exc}")
    except OpenPGPError as exc:
        module.fail_json(msg=f"{path} is not a valid OpenPGP keyring: {exc}")
    module.exit_json(
        changed=False, primary_keys=info["keys"], fingerprints=[key["fingerprint"] for key in info["keys"]]
    )


if __name__ == "__main__":
    main()
