"""All-reduce bus bandwidth through PyTorch's NCCL, printed in nccl-tests' all_reduce_perf text format.

For sites without nccl-tests: one process per local GPU (spawned here), float32 sum, message sizes from
--min-bytes to --max-bytes by --factor, in-place (torch.distributed.all_reduce is in-place), --iters timed
iterations after --warmup. algbw = bytes / time; busbw = algbw * 2 (n - 1) / n, as nccl-tests defines it.
Each size is checked once on fresh data (every rank contributes rank + 1; the sum must be n (n + 1) / 2):
the #wrong column counts wrong elements. The "# nccl-library=" line reports the NCCL version PyTorch loaded.
"""

import argparse
import os
import socket
import sys
import time


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    if text[-1:] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def sizes(min_bytes, max_bytes, factor):
    size = min_bytes
    while size <= max_bytes:
        yield size
        size *= factor


def worker(rank, world, args, port):
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    expected = world * (world + 1) / 2
    if rank == 0:
        major, minor, patch = torch.cuda.nccl.version()
        print(f"# torch {torch.__version__} nccl-library={major * 10000 + minor * 100 + patch}", flush=True)
        print(
            f"# nThread 1 nGpus 1 nRanks {world} minBytes {args.min_bytes} maxBytes {args.max_bytes} "
            f"step: {args.factor}(factor) warmup iters: {args.warmup} iters: {args.iters}",
            flush=True,
        )
        print("#  Rank  Device  Name", flush=True)
    dist.barrier()
    for peer in range(world):
        if rank == peer:
            print(f"#  Rank {rank:2d} device {rank:2d} {torch.cuda.get_device_name(rank)}", flush=True)
        dist.barrier()
    if rank == 0:
        print("#                                            in-place", flush=True)
        print("#       size         count      type   redop    root     time   algbw   busbw  #wrong", flush=True)
        print("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)", flush=True)
    busbw_sum, count = 0.0, 0
    for size in sizes(args.min_bytes, args.max_bytes, args.factor):
        elements = max(size // 4, 1)
        buffer = torch.ones(elements, dtype=torch.float32, device="cuda")
        for _warmup in range(args.warmup):
            dist.all_reduce(buffer)
        torch.cuda.synchronize()
        dist.barrier()
        start = time.perf_counter()
        for _iteration in range(args.iters):
            dist.all_reduce(buffer)
        torch.cuda.synchronize()
        elapsed = (time.perf_counter() - start) / args.iters
        buffer.fill_(rank + 1)
        dist.all_reduce(buffer)
        wrong = torch.tensor([int((buffer != expected).sum().item())], device="cuda")
        dist.all_reduce(wrong)
        del buffer
        algbw = elements * 4 / elapsed / 1e9
        busbw = algbw * 2 * (world - 1) / world
        busbw_sum += busbw
        count += 1
        if rank == 0:
            print(
                f"{elements * 4:12d}  {elements:12d}     float     sum      -1  {elapsed * 1e6:7.2f}  "
                f"{algbw:6.2f}  {busbw:6.2f}  {int(wrong.item()):6d}",
                flush=True,
            )
    if rank == 0:
        print(f"# Avg bus bandwidth    : {busbw_sum / max(count, 1):g} ", flush=True)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-b", "--min-bytes", type=parse_size, default=parse_size("8"))
    parser.add_argument("-e", "--max-bytes", type=parse_size, default=parse_size("8G"))
    parser.add_argument("-f", "--factor", type=int, default=2)
    parser.add_argument("-n", "--iters", type=int, default=20)
    parser.add_argument("-w", "--warmup", type=int, default=5)
    parser.add_argument("-g", "--gpus", type=int, default=0, help="GPUs to use (default: all visible)")
    args = parser.parse_args()

    import torch
    import torch.multiprocessing as mp

    world = args.gpus or torch.cuda.device_count()
    if world < 1:
        print("# no CUDA device visible", file=sys.stderr)
        return 2
    mp.spawn(worker, args=(world, args, free_port()), nprocs=world, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
