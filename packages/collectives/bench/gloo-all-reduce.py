"""PyTorch gloo float32 all-reduce timings, the peer of the tcp rows in `npm run bench:collectives`.

Usage: python3 gloo-all-reduce.py WORLD_SIZE ITERATIONS WARMUP BYTES [BYTES ...]
Prints one JSON line: {"worldSize": W, "rows": [{"bytes": B, "ms": [...], "cpuMs": C}, ...]} measured on
rank 0, each op preceded by a barrier, like the TypeScript sweep; cpuMs is rank 0's process CPU time
(every thread: the caller's and gloo's transport loop) per timed op, its barrier included.
"threads" gives, per timed op, CPU ms and voluntary (blocking wake-ups) / involuntary context switches of
rank 0's main thread, its busiest other thread and the rest together, from /proc/self/task (Linux).
GLOO_BARRIER=0 times the ops back to back, without the barrier before each.
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


def thread_counters():
    """{tid: (cpu ms, voluntary, involuntary)} for every thread of this process (empty if no /proc)."""
    counters = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return counters
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/self/task/{tid}/status") as status:
                lines = dict(line.split(":", 1) for line in status.read().splitlines() if ":" in line)
            counters[int(tid)] = (
                (int(fields[11]) + int(fields[12])) * tick_ms,
                int(lines["voluntary_ctxt_switches"]),
                int(lines["nonvoluntary_ctxt_switches"]),
            )
        except (OSError, KeyError, IndexError):
            continue
    return counters


def per_op_by_role(before, after, ops):
    """Per-op deltas: the main thread, the busiest other thread, the rest together."""
    deltas = {}
    for tid, (cpu, vol, invol) in after.items():
        start = before.get(tid, (0.0, 0, 0))
        deltas[tid] = (cpu - start[0], vol - start[1], invol - start[2])
    main = deltas.pop(os.getpid(), (0.0, 0, 0))
    rest = sorted(deltas.values(), key=lambda delta: -(delta[1] + delta[0]))
    busiest = rest[0] if rest else (0.0, 0, 0)
    others = tuple(sum(delta[index] for delta in rest[1:]) for index in range(3))

    def per(delta):
        return {"cpuMs": delta[0] / ops, "voluntary": delta[1] / ops, "involuntary": delta[2] / ops}

    return {"main": per(main), "busiest": per(busiest), "others": per(others)}


def rank_main(rank: int, world_size: int, port: int, iterations: int, warmup: int, sizes, queue) -> None:
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    rows = []
    warmup_bytes = int(os.environ.get("WARMUP_BYTES", "0"))
    timed_bytes = int(os.environ.get("TIMED_BYTES", "0"))
    for size_bytes in sizes:
        tensor = torch.arange(size_bytes // 4, dtype=torch.float32).remainder_(13).sub_(6)
        times = []
        cpu_start = 0.0
        threads_start = {}
        barrier = os.environ.get("GLOO_BARRIER") != "0"
        # The same rule as bench/sweep.ts's opsByVolume ([Note: warm-up by volume]).
        warmups = max(warmup, -(-warmup_bytes // size_bytes) if size_bytes > 0 else 0)
        timed = max(iterations, -(-timed_bytes // size_bytes) if size_bytes > 0 else 0)
        for iteration in range(warmups + timed):
            if iteration == warmups:
                cpu_start = time.process_time()
                threads_start = thread_counters()
            if barrier:
                dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(tensor)
            elapsed = (time.perf_counter() - start) * 1000
            if iteration >= warmups:
                times.append(elapsed)
        cpu_ms = (time.process_time() - cpu_start) * 1000 / max(1, timed)
        threads = per_op_by_role(threads_start, thread_counters(), max(1, timed))
        rows.append({"bytes": size_bytes, "ms": times, "cpuMs": cpu_ms, "threads": threads})
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
