# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Filter of role nccl: the feature-minimum report (documented in nccl_feature_report.yml; logic in module_utils)."""

from ansible_collections.gpucluster.fabric.plugins.module_utils import nccl


def nccl_feature_report(features, table, facts):
    return nccl.feature_report(features, table, facts)


class FilterModule:
    def filters(self):
        return {"nccl_feature_report": nccl_feature_report}
