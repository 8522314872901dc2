#!/usr/bin/env bash
# Print the locked-memory limit (KiB, or "unlimited") the lab asks rdma_core to set.
# Production hosts get "unlimited". A machine whose root lacks CAP_SYS_RESOURCE (seen on our CI VMs:
# even root cannot raise RLIMIT_MEMLOCK above 8 MiB) cannot prove a raise, so the lab asks for half the
# current hard limit instead: a value that differs from the default and that only the role's
# configuration can have put in force for a new login or service.
set -euo pipefail
if sh -c 'ulimit -Hl unlimited' 2>/dev/null; then
  echo unlimited
else
  echo $(($(ulimit -Hl) / 2))
fi
