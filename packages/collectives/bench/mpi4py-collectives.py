"""Open MPI called directly through mpi4py: the peer of the mpi rows in `npm run bench:collectives`.

Usage: mpirun -np W python3 mpi4py-collectives.py CONFIG_JSON
CONFIG_JSON has the sweep's ops (allReduce, allGather, reduceScatter), sizes (full-buffer bytes),
iterations, warmup, warmupBytes and timedBytes, and nonBlocking: true to call the non-blocking
collectives the mpi backend calls (Iallreduce, Iallgather, Ireduce_scatter_block, then Wait)
instead of the blocking ones; every op is preceded by a barrier and timed on rank 0,
as bench/sweep.ts times the TypeScript ops (the same element counts: a multiple of the world size).
Rank 0 prints one JSON line: {"rows": [{"op": ..., "bytes": B, "ms": [...]}, ...]}.
"""

import json
import math
import sys
import time

import numpy as np
from mpi4py import MPI

config = json.loads(sys.argv[1])
comm = MPI.COMM_WORLD
size = comm.Get_size()


def ops_by_volume(minimum, total, nbytes):
    return max(minimum, math.ceil(total / nbytes) if nbytes > 0 else 0)


def case(op, nbytes):
    total = (nbytes // 4 // size) * size
    shard = total // size
    full = (np.arange(total, dtype=np.float32) % 13) - 6
    if config.get("nonBlocking"):
        if op == "allReduce":
            return total * 4, lambda: comm.Iallreduce(MPI.IN_PLACE, full, op=MPI.SUM).Wait()
        if op == "allGather":
            mine = np.ones(shard, dtype=np.float32)
            return total * 4, lambda: comm.Iallgather(mine, full).Wait()
        out = np.empty(shard, dtype=np.float32)
        return total * 4, lambda: comm.Ireduce_scatter_block(full, out, op=MPI.SUM).Wait()
    if op == "allReduce":
        return total * 4, lambda: comm.Allreduce(MPI.IN_PLACE, full, op=MPI.SUM)
    if op == "allGather":
        mine = np.ones(shard, dtype=np.float32)
        return total * 4, lambda: comm.Allgather(mine, full)
    out = np.empty(shard, dtype=np.float32)
    return total * 4, lambda: comm.Reduce_scatter_block(full, out, op=MPI.SUM)


rows = []
for op in config["ops"]:
    for nbytes in config["sizes"]:
        measured, run = case(op, nbytes)
        for _ in range(ops_by_volume(config["warmup"], config.get("warmupBytes", 0), nbytes)):
            comm.Barrier()
            run()
        times = []
        for _ in range(ops_by_volume(config["iterations"], config.get("timedBytes", 0), nbytes)):
            comm.Barrier()
            start = time.perf_counter()
            run()
            times.append((time.perf_counter() - start) * 1000)
        rows.append({"op": op, "bytes": measured, "ms": times})
if comm.Get_rank() == 0:
    print(json.dumps({"rows": rows}))
