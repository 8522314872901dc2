#!/usr/bin/env bash
# Run the collection's site playbook from inside the execution environment (localhost/gpucluster-ee:lab, `make ee`)
# with ansible-navigator against the running lab (`make lab` first), as AWX/AAP would run a job template: the
# playbook is the installed collection's `gpucluster.fabric.site`, not this checkout's file, and the inventory is
# this checkout's inventories/lab. What the lab inventory reads from the controller goes in as mounts and
# environment: the SSH key and known_hosts (LAB_SSH_ROOT), the CUDA mirror cache, the report directory.
#
#   run-site.sh [extra ansible-playbook arguments]
#
# Prints the report directory's summary line; exits with ansible-playbook's status.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
: "${LAB_SSH_ROOT:=$root/.build/lab-ssh}"
: "${LAB_MIRROR_CACHE:=/var/tmp/gpucluster-lab-mirror}"
: "${LAB_REPORT_DIR:=$root/.build/ee/reports}"
# What `make lab` asks rdma_core for (the Makefile exports it; the same script when run by hand).
: "${LAB_MEMLOCK_KIB:=$("$root/tests/lab/memlock-kib.sh")}"
mkdir -p "$LAB_REPORT_DIR" "$root/.build/ee/artifacts"
export LAB_SSH_ROOT LAB_MIRROR_CACHE LAB_REPORT_DIR LAB_MEMLOCK_KIB ANSIBLE_CONFIG="$root/tests/lab/ansible.cfg"
navigator=${ANSIBLE_NAVIGATOR:-$root/.venv/bin/ansible-navigator}

args=(
  run gpucluster.fabric.site -i "$root/inventories/lab"
  --mode stdout --container-engine podman --pull-policy never
  --execution-environment-image localhost/gpucluster-ee:lab
  # The lab's containers sit on podman networks of this host: the EE reaches them the way the controller does.
  --container-options=--network=host
  # The lab key and the report directory are root's on this host; the image's default user (1000) could not read them.
  --container-options=--user=0
  --execution-environment-volume-mounts "$LAB_SSH_ROOT:$LAB_SSH_ROOT:ro"
  --execution-environment-volume-mounts "$LAB_MIRROR_CACHE:$LAB_MIRROR_CACHE:ro"
  --execution-environment-volume-mounts "$LAB_REPORT_DIR:$LAB_REPORT_DIR"
  --execution-environment-volume-mounts "$root/tests/lab/ansible.cfg:$root/tests/lab/ansible.cfg:ro"
)
for name in ANSIBLE_CONFIG LAB_SSH_ROOT LAB_MIRROR_CACHE LAB_REPORT_DIR LAB_SUITE LAB_MEMLOCK_KIB; do
  [[ -n "${!name:-}" ]] && args+=(--pass-environment-variable "$name")
done
args+=(--playbook-artifact-save-as "$root/.build/ee/artifacts/{playbook_name}-{time_stamp}.json"
  --log-file "$root/.build/ee/ansible-navigator.log")
rc=0
"$navigator" "${args[@]}" "$@" || rc=$?
report=$(ls -td "$LAB_REPORT_DIR"/*/ 2>/dev/null | head -n1 || true)
[[ -n "$report" ]] && echo "Validation report (written from inside the EE): ${report}summary.md"
exit "$rc"
