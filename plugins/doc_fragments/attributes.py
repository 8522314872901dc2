# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The attributes the collection's modules share (the shape of community.general's ``attributes`` fragment)."""


class ModuleDocFragment:
    # What check_mode and diff_mode mean; every module extends this one and states its support itself or through
    # one of the fragments below.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in --diff mode) when in diff mode.
"""

    # Modules that only read: the same result in check mode, nothing to diff.
    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details: This action only reads, so check mode returns the same result.
  diff_mode:
    support: N/A
    details: This action changes nothing, so there is no diff.
"""

    # Modules that run on the managed host and read or change it through POSIX paths and tools.
    POSIX = r"""
options: {}
attributes:
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
"""

    # Action plugins that run on the controller only, whatever the host.
    CONTROLLER = r"""
options: {}
attributes:
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    details: Runs on the controller only; the target host is never contacted.
    platforms: posix
"""
