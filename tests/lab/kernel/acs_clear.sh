#!/usr/bin/env bash
# ACS clearing (role rdma_modules' rdma_modules_acs_clear) on a real kernel: boots one kernel-lab VM with an emulated
# Intel IOMMU and two PCIe root ports (Linux turns ACS on at both: 0x1d), then runs the collection's own
# plugins/module_utils/pcie.py in it, as gpucluster-acs-clear.service does, on the real sysfs: clear_acs_redirect on
# each root port, and the ACS Control read back from the kernel must keep SrcValid and UpstreamFwd only (0x11).
# The VM has no NVIDIA GPU or RDMA NIC (QEMU emulates neither), so the bridges are named here rather than found on a
# GPU-NIC path; the path finding is tested on this VM's captured tree (tests/unit/test_pcie.py).
#
#   tests/lab/kernel/acs_clear.sh [run-dir]    (about a minute under TCG; needs the kernel lab's base image)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
run_dir=${1:-$(mktemp -d /var/tmp/gpucluster-acs-clear.XXXXXX)}
trap '"$here/vm-down.sh" "$run_dir" >/dev/null 2>&1 || true' EXIT
KERNEL_LAB_QEMU_EXTRA="-device intel-iommu,intremap=off
  -device pcie-root-port,id=rp1,bus=pcie.0,chassis=1,addr=0x8 -device virtio-rng-pci,bus=rp1
  -device pcie-root-port,id=rp2,bus=pcie.0,chassis=2,addr=0x9 -device virtio-rng-pci,bus=rp2" \
  KERNEL_LAB_APPEND="intel_iommu=on" "$here/vm-up.sh" "$run_dir" vm >/dev/null
"$here/vm-wait-ssh.sh" "$run_dir" vm >/dev/null
"$here/vm-ssh.sh" "$run_dir" vm 'mkdir -p /tmp/acs && cat > /tmp/acs/pcie.py' <"$root/plugins/module_utils/pcie.py"
# shellcheck disable=SC2016 # expanded in the VM
"$here/vm-ssh.sh" "$run_dir" vm 'cd /tmp/acs && python3 - <<"PY"
import pcie
status = 0
for bridge in ("0000:00:08.0", "0000:00:09.0"):
    path = f"/sys/bus/pci/devices/{bridge}/config"
    before = pcie.acs_control(open(path, "rb").read())
    written = pcie.clear_acs_redirect("/", bridge)
    after = pcie.acs_control(open(path, "rb").read())  # read back from the kernel
    ok = before == 0x1D and written == (0x1D, 0x11) and after == 0x11
    status |= not ok
    print(f"{bridge}: ACS Control {before:#06x} -> wrote {written[1]:#06x} -> reads {after:#06x}:", "ok" if ok else "WRONG")
raise SystemExit(status)
PY'
echo "acs_clear: the kernel took the cleared ACS Control on both root ports"
