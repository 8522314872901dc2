#!/usr/bin/env bash
# Boot kernel-lab VMs under qemu TCG from the cached base (built first when missing or outdated).
#
#   vm-up.sh <run-dir> <name>...
#
# Each VM gets a qcow2 overlay on base.img, SSH forwarded from a free port on 127.0.0.1, a management NIC (eth0, qemu
# user networking with NAT) and a fabric NIC (eth1) on an L2 segment shared by every VM of <run-dir> (qemu socket
# multicast on loopback; each run dir picks its own UDP port, so concurrent labs do not see each other). MACs are
# distinct per VM. Each VM gets its own ed25519 SSH host key, made here and handed in through qemu fw_cfg (the guest
# installs it before sshd starts); <run-dir>/known_hosts lists every VM's port with its key, so clients check host
# keys strictly. Writes <run-dir>/<name>.json (instance, address, port, user, identity_file, known_hosts,
# fabric_mac) and prints a JSON list of them. Does not wait for SSH: see vm-wait-ssh.sh.
#
# KERNEL_LAB_SMP (1) and KERNEL_LAB_MEM (512, MiB) size each VM; KERNEL_LAB_QEMU_EXTRA adds qemu arguments.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
run_dir=${1:?usage: vm-up.sh <run-dir> <name>...}
shift
[[ $# -gt 0 ]] || {
  echo "usage: vm-up.sh <run-dir> <name>..." >&2
  exit 2
}
for tool in qemu-system-x86_64 qemu-img python3 ssh-keygen; do
  command -v "$tool" >/dev/null || {
    echo "missing $tool (apt-get install qemu-system-x86 qemu-utils python3 openssh-client)" >&2
    exit 1
  }
done

base=$("$here/build-base.sh" | tail -n 1)
mkdir -p "$run_dir"
run_dir=$(cd "$run_dir" && pwd)

free_port() { # a port the kernel just handed out as free ($1: tcp|udp)
  python3 -c 'import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM if sys.argv[1] == "tcp" else socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' "$1"
}

# The shared fabric segment of this run dir (kept, so VMs added later join the same segment).
if [[ ! -f "$run_dir/fabric-port" ]]; then free_port udp >"$run_dir/fabric-port"; fi
fabric_port=$(cat "$run_dir/fabric-port")
fabric_group=${KERNEL_LAB_MCAST_GROUP:-230.0.0.1}

index=0
for name in "$@"; do
  index=$((index + 1))
  [[ "$name" =~ ^[a-z0-9][a-z0-9-]*$ ]] || {
    echo "VM name '$name' must be lower-case letters, digits and '-'" >&2
    exit 2
  }
  vm="$run_dir/$name"
  if [[ -f "$vm.pid" ]] && kill -0 "$(cat "$vm.pid")" 2>/dev/null; then
    echo "$name is already running (pid $(cat "$vm.pid"))" >&2
    continue
  fi
  qemu-img create -q -f qcow2 -F raw -b "$base/base.img" "$vm.qcow2"
  rm -f "$vm.ssh_host_ed25519_key" "$vm.ssh_host_ed25519_key.pub"
  ssh-keygen -q -t ed25519 -N '' -C "kernel-lab-$name" -f "$vm.ssh_host_ed25519_key"
  ssh_port=$(free_port tcp)
  mgmt_mac=$(printf '52:54:00:4c:00:%02x' "$index")
  fabric_mac=$(printf '52:54:00:fa:00:%02x' "$index")
  # shellcheck disable=SC2086 # KERNEL_LAB_QEMU_EXTRA is a list of arguments
  qemu-system-x86_64 \
    -name "kernel-lab-$name" -nodefaults -display none \
    -accel tcg,tb-size=256 -machine q35 -cpu max \
    -smp "${KERNEL_LAB_SMP:-1}" -m "${KERNEL_LAB_MEM:-512}" \
    -kernel "$base/vmlinuz" -initrd "$base/initrd.img" \
    -append "root=/dev/vda rw console=ttyS0 net.ifnames=0 systemd.hostname=$name${KERNEL_LAB_APPEND:+ $KERNEL_LAB_APPEND}" \
    -drive "file=$vm.qcow2,if=virtio,format=qcow2" \
    -netdev "user,id=mgmt,hostfwd=tcp:127.0.0.1:$ssh_port-:22" \
    -device "virtio-net-pci,netdev=mgmt,mac=$mgmt_mac" \
    -netdev "socket,id=fabric,mcast=$fabric_group:$fabric_port,localaddr=127.0.0.1" \
    -device "virtio-net-pci,netdev=fabric,mac=$fabric_mac" \
    -device virtio-rng-pci \
    -fw_cfg "name=opt/gpucluster/ssh_host_ed25519_key,file=$vm.ssh_host_ed25519_key" \
    -serial "file:$vm.console" -pidfile "$vm.pid" -daemonize \
    ${KERNEL_LAB_QEMU_EXTRA:-}
  cat >"$vm.json" <<JSON
{"instance": "$name", "address": "127.0.0.1", "port": $ssh_port, "user": "root",
 "identity_file": "$base/id_ed25519", "known_hosts": "$run_dir/known_hosts",
 "host_key": "$vm.ssh_host_ed25519_key.pub", "fabric_mac": "$fabric_mac", "console": "$vm.console"}
JSON
  echo "$name: qemu pid $(cat "$vm.pid"), ssh 127.0.0.1:$ssh_port, console $vm.console" >&2
done

# known_hosts of the run dir, from every VM it holds (also those an earlier call started): [127.0.0.1]:<port> <key>
shopt -s nullglob
python3 -c 'import json, sys
for f in sys.argv[1:]:
    c = json.load(open(f))
    print("[%s]:%s" % (c["address"], c["port"]), *open(c["host_key"]).read().split()[:2])' \
  "$run_dir"/*.json >"$run_dir/known_hosts.new"
mv "$run_dir/known_hosts.new" "$run_dir/known_hosts"

configs=()
for name in "$@"; do configs+=("$run_dir/$name.json"); done
python3 -c 'import json, sys; print(json.dumps([json.load(open(f)) for f in sys.argv[1:]]))' "${configs[@]}"
