# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Fabric validation logic: pairing, threshold checks, fleet outliers. Pure functions used by the filters in
plugins/filter/fabric_validate.py; every check is a dict with host, tier, check, status (passed | failed | skipped),
measured, threshold, unit and message.

Split by tier around one check record (``record.check``): ``inputs`` (what the validation is given), ``health``,
``rdma``, ``nccl`` and ``fleet`` (across hosts: outliers, versions, the whole evaluation). Every name is importable from
here, as before the split.
"""

from .fleet import (  # noqa: F401
    evaluate,
    failure_lines,
    fleet_gid_checks,
    fleet_sm_checks,
    fleet_version_checks,
    nccl_side_by_side,
    outlier_checks,
    plot_series,
    software_versions,
)
from .health import (  # noqa: F401
    PENDING_REBOOT,
    SM_HINT,
    _gpu_health,
    _nccl_conf_health,
    _qos_value,
    acs_checks,
    collected_record,
    firmware_checks,
    health_checks,
    host_record,
    iommu_checks,
    node_check_records,
    node_judged_checks,
    pcie_checks,
    roce_gid_checks,
    roce_qos_health,
    sm_query_records,
    sm_verdict,
    subnet_manager_checks,
    with_sm,
)
from .inputs import (  # noqa: F401
    FRACTION_THRESHOLDS,
    MEASUREMENTS_SHAPE,
    NCCL_BENCHMARKS,
    POSITIVE_THRESHOLDS,
    TIERS,
    expected_interface_mtus,
    measurements_errors,
    merge_thresholds,
    preflight_errors,
    rdma_reference_errors,
    reference_errors,
)
from .isolation import isolation_checks  # noqa: F401
from .nccl import (  # noqa: F401
    DATA_PATH_WORDS,
    _cite,
    _conf_settings,
    _missing_reference,
    _nccl_run_check,
    _shape,
    busbw_reference,
    data_path_checks,
    nccl_checks,
    nccl_run_records,
    nccl_runs,
    reference_measurement,
)
from .rdma import (  # noqa: F401
    RDMA_TESTS,
    _attempts,
    _from_json,
    _output,
    _parsed,
    _rdma_bw_check,
    _rdma_run_check,
    perftest_argv,
    rdma_bw_reference,
    rdma_checks,
    rdma_part,
    rdma_retry_rounds,
    rdma_round_record,
    rdma_rounds,
)
from .record import (  # noqa: F401
    STATUSES,
    _check,
    _ports,
    _rdma_port,
    check,
)
