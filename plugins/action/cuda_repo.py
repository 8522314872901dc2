# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

"""Action plugin gpucluster.fabric.cuda_repo (documented in plugins/modules/cuda_repo.py): reads the controller's
cuda-keyring .deb (``keyring_deb_src``) as the probe's action plugin does, and fails on any problem."""

from ansible_collections.gpucluster.fabric.plugins.action.cuda_repo_probe import ActionModule as ProbeAction


class ActionModule(ProbeAction):
    MODULE = "gpucluster.fabric.cuda_repo"
    ALWAYS_FAILS = True
