# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Filters for parsing perftest / nccl-tests output and for the fabric_validate role's evaluation.

Public: perftest_parse, nccl_tests_parse. Used by roles/fabric_validate: fabric_rdma_rounds, fabric_rdma_retry_rounds,
fabric_rdma_part, fabric_perftest_json_capable,
fabric_perftest_argv, fabric_rdma_round_record, fabric_nccl_run_records,
fabric_preflight_errors, fabric_merge_thresholds, fabric_expected_mtus, fabric_sm_query_ports, fabric_host_record;
by its report template: fabric_md_cell.
Public for module fabric_report_plot: fabric_plot_series (logic in plugins/module_utils/fabric_checks/fleet.py).
Each filter is documented in <name>.yml.
"""

from ansible_collections.gpucluster.fabric.plugins.plugin_utils.lazy import function


def _checks(name):
    return function("module_utils.fabric_checks", name)


def perftest_parse(text):
    parsed = function("module_utils.perftest", "parse_perftest")(text)
    parsed["summary"] = function("module_utils.perftest", "summarize_perftest")(parsed)
    return parsed


def perftest_probe_json_capable(probe):
    """perftest_json_capable on the registered loop of ``ib_write_bw --version`` and ``ib_write_bw --help`` (each
    exits non-zero, and a host without perftest has neither: not capable)."""
    outputs = {r.get("item"): r.get("stdout") or "" for r in (probe or {}).get("results") or [] if isinstance(r, dict)}
    return function("module_utils.perftest", "perftest_json_capable")(
        outputs.get("--version", ""), outputs.get("--help", "")
    )


def nccl_tests_parse(text):
    return function("module_utils.nccl_tests", "parse_nccl_tests")(text)


class FilterModule:
    def filters(self):
        rdma_rounds = _checks("rdma_rounds")
        preflight_errors = _checks("preflight_errors")
        return {
            "perftest_parse": perftest_parse,
            "nccl_tests_parse": nccl_tests_parse,
            "fabric_rdma_rounds": lambda hosts, pairs=None, present=None: rdma_rounds(hosts, pairs or None, present),
            "fabric_rdma_retry_rounds": _checks("rdma_retry_rounds"),
            "fabric_rdma_part": _checks("rdma_part"),
            "fabric_perftest_argv": _checks("perftest_argv"),
            "fabric_perftest_json_capable": perftest_probe_json_capable,
            "fabric_rdma_round_record": _checks("rdma_round_record"),
            "fabric_nccl_run_records": _checks("nccl_run_records"),
            # One mapping of the role's inputs, named as preflight_errors' parameters.
            "fabric_preflight_errors": lambda inputs: preflight_errors(**inputs),
            "fabric_merge_thresholds": _checks("merge_thresholds"),
            "fabric_expected_mtus": _checks("expected_interface_mtus"),
            "fabric_plot_series": _checks("plot_series"),
            "fabric_md_cell": function("plugin_utils.report_files", "markdown_cell"),
            "fabric_sm_query_ports": function("module_utils.sminfo", "query_ports"),
            "fabric_host_record": _checks("host_record"),
        }
