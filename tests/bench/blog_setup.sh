#!/bin/bash
# THE BLOG'S APPROACH, NOT OURS. Baseline for tests/bench/site_bench.py only; never use it on a cluster.
#
# A line-by-line transcription of what the blog that started this project (../shared/seed/ai-cluster-network-blog.zh.txt,
# "环境快速搭建脚本" plus the commands it tells the reader to run by hand) does to a GPU node, in the blog's order, so
# that the benchmark can compare our site playbook with what a user would otherwise run. Its mistakes are kept on
# purpose (see ../shared/FACTS.md): no `set -e`, `apt` without `apt update` first, cuda-keyring 1.0-1 (outdated),
# the ubuntu2004 repository whatever the host is, a non-existent `nccl-tests` package (apt then installs neither
# package), modprobe nvidia-peermem without checking it can load, `ifconfig ib0 mtu 4092` whatever the link MTU and
# mode, debug-only NCCL variables hard-coded, and ibv_rc_pingpong (no peer: it fails, or waits for one for ever on a
# host with an RDMA device) as the "test".
#
# The only change for the lab: the NVIDIA host part of the keyring URL comes from $CUDA_REPO_BASE (the benchmark
# points it at the lab mirror, tests/lab/mirror; the default is the blog's URL).
#
# Delivery, as a user of the blog would do it with pdsh: the benchmark copies this file into every node and runs it
# there, all nodes at once (`podman cp` + `podman exec <node> bash /tmp/blog_setup.sh`, one process per node, at
# most 32 at a time like pdsh's default fan-out). An ERR trap set by the caller reports which commands failed.

# 适用于 Ubuntu 20.04 的 RDMA 环境
apt install -y rdma-core libibverbs-dev ibverbs-utils
wget "${CUDA_REPO_BASE:-https://developer.download.nvidia.com}/compute/cuda/repos/ubuntu2004/x86_64/cuda-keyring_1.0-1_all.deb"
dpkg -i cuda-keyring_*.deb
apt update && apt install -y nccl-tests libnccl2

# 1. 加载内核模块
modprobe nvidia-peermem
modprobe ib_core

# 避坑指南 1. MTU 设置错误：必须设为最大值（检查所有节点！）
ifconfig ib0 mtu 4092

# 2. 设置 NCCL 参数 / 关键 NCCL 调优参数 — the blog sets these in the training script (os.environ); it never
# persists them on the node. A shell user exports them, which lasts only as long as this shell.
export NCCL_IB_DISABLE=0
export NCCL_SOCKET_IFNAME=ib0
export NCCL_ALGO=Ring
export NCCL_NSOCKS_PERTHREAD=4
export NCCL_BUFFSIZE=4194304

# 验证安装
ibv_rc_pingpong
