"""The PyTorch peer of the tensor benchmark: one `torch.mm` of two n x n float32 matrices per
request, one thread (OPENBLAS_NUM_THREADS=1 and torch.set_num_threads(1), like one fsdp-ts rank).

Protocol (stdin/stdout, one line each): the first line printed describes torch and its BLAS;
then for every line "n" read, one line with the CPU milliseconds of this process for one product.
"""
import sys
import time

import torch

torch.set_num_threads(1)
maps = set()
with open("/proc/self/maps") as maps_file:
    for line in maps_file:
        if "blas" in line:
            maps.add(line.split()[-1])
print(f"torch {torch.__version__}, 1 thread, BLAS mapped: {', '.join(sorted(maps)) or 'none'}", flush=True)
matrices = {}
for line in sys.stdin:
    n = int(line)
    if n not in matrices:
        matrices[n] = (torch.randn(n, n), torch.randn(n, n), torch.empty(n, n))
    a, b, out = matrices[n]
    start = time.process_time()
    torch.mm(a, b, out=out)
    print(f"{(time.process_time() - start) * 1000:.4f}", flush=True)
