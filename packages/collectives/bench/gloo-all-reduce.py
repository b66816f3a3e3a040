"""PyTorch gloo float32 all-reduce timings, the peer of the tcp rows in `npm run bench:collectives`.

Usage: python3 gloo-all-reduce.py WORLD_SIZE ITERATIONS WARMUP BYTES [BYTES ...]
Prints one JSON line: {"worldSize": W, "rows": [{"bytes": B, "ms": [...], "cpuMs": C}, ...]} measured on
rank 0, each op preceded by a barrier, like the TypeScript sweep; cpuMs is rank 0's process CPU time
(every thread: the caller's and gloo's transport loop) per timed op, its barrier included.
"""

import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rank_main(rank: int, world_size: int, port: int, iterations: int, warmup: int, sizes, queue) -> None:
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    rows = []
    for size_bytes in sizes:
        tensor = torch.arange(size_bytes // 4, dtype=torch.float32).remainder_(13).sub_(6)
        times = []
        cpu_start = 0.0
        for iteration in range(warmup + iterations):
            if iteration == warmup:
                cpu_start = time.process_time()
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(tensor)
            elapsed = (time.perf_counter() - start) * 1000
            if iteration >= warmup:
                times.append(elapsed)
        cpu_ms = (time.process_time() - cpu_start) * 1000 / max(1, iterations)
        rows.append({"bytes": size_bytes, "ms": times, "cpuMs": cpu_ms})
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def main() -> None:
    world_size, iterations, warmup = (int(value) for value in sys.argv[1:4])
    sizes = [int(value) for value in sys.argv[4:]]
    context = mp.get_context("spawn")
    queue = context.Queue()
    port = free_port()
    processes = [
        context.Process(target=rank_main, args=(rank, world_size, port, iterations, warmup, sizes, queue))
        for rank in range(world_size)
    ]
    for process in processes:
        process.start()
    rows = queue.get(timeout=600)
    for process in processes:
        process.join(timeout=60)
    print(json.dumps({"worldSize": world_size, "rows": rows}))


if __name__ == "__main__":
    main()
