"""PyTorch peer of bench/fsdp-training.ts: the reference GPT trained by DDP or FSDP at W ranks with
gloo on CPU (or one plain process), one thread per rank, AdamW, the same tokens as the TypeScript
ranks. Run by the TypeScript benchmark with Debian's /usr/bin/python3 (python3-torch):

    /usr/bin/python3 torch-fsdp-training.py '{"mode": "fsdp", "worldSize": 2, "vocabSize": 256,
        "dModel": 256, "nLayers": 4, "nHeads": 4, "seqLen": 16, "batch": 1, "warmupSteps": 3,
        "measuredSteps": 30}'

With BENCH_TORCH_RANK, MASTER_ADDR and MASTER_PORT in the environment it runs that one rank of a
job spread over hosts (bench/cluster) instead of spawning every rank here.

Prints one JSON line from rank 0: {"stepMs": [...], "cpuMs": [...], "torch": version}. stepMs is
wall time between barriers; cpuMs is rank 0's process CPU time (all its threads). With
BENCH_WIRE_COUNTER (a tx_bytes file) also "wireBytes": what rank 0's host sent in each step; with
BENCH_JOB_CPU also "jobCpu": every process of the job per step, counted as job-cpu.ts counts fsdp-ts's
(`JobCpu` below). "flushDenormal": true in the request calls torch.set_flush_denormal(True) first.

[Note: FSDP on CPU in PyTorch 1.13]
PyTorch 1.13's FSDP refuses CPU-only execution in `_lazy_init` ("FSDP does not support CPU only
execution") and schedules its all-gathers and reductions on CUDA streams. The smallest patch that
lets it run, applied by `allow_fsdp_on_cpu()` below and only in this process: report CUDA as
available to FSDP's modules, give them stand-in streams and events whose waits are no-ops
(`torch.cuda.Stream`, `stream()`, `current_stream()`, `Event`, `synchronize`), use the CPU as the
compute device, and give gloo the two collectives FSDP calls and gloo 1.13 lacks (all-gather into
one tensor: all-gather into its chunks; reduce-scatter: all-reduce, then this rank's chunk, which
moves twice the bytes). Gloo collectives called synchronously complete before they return, so the
ordering is what the streams would have enforced. Parameters, gradients and collectives stay real CPU tensors over gloo;
nothing else is changed. The units are the transformer blocks (`transformer_auto_wrap_policy`),
FULL_SHARD, no CPU offload, float32.
Debian's torch 1.13 on Python 3.11 also fails to import torch.distributed.fsdp: its sharded-tensor
metadata declares a dataclass instance as a field default, which Python 3.11 rejects ("mutable
default"). `import_fsdp()` turns such a default into a default_factory of a copy while importing.
"""
import contextlib
import json
import math
import os
import re
import sys
import time

os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')
os.environ.setdefault('OMP_NUM_THREADS', '1')

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.attentionNorm = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.out = torch.nn.Linear(d, d)
        self.mlpNorm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.attentionNorm(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        mixed = (scores.masked_fill(mask, float('-inf')).softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.out(mixed)
        return x + self.down(F.gelu(self.up(self.mlpNorm(x)), approximate='tanh'))


class GPT(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.tokenEmbedding = torch.nn.Embedding(c['vocabSize'], c['dModel'])
        self.positionEmbedding = torch.nn.Embedding(c['seqLen'], c['dModel'])
        self.blocks = torch.nn.ModuleList([Block(c['dModel'], c['nHeads']) for _ in range(c['nLayers'])])
        self.finalNorm = torch.nn.LayerNorm(c['dModel'])
        self.lmHead = torch.nn.Linear(c['dModel'], c['vocabSize'], bias=False)
        self.lmHead.weight = self.tokenEmbedding.weight

    def forward(self, tokens):
        x = self.tokenEmbedding(tokens) + self.positionEmbedding(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.lmHead(self.finalNorm(x))


class _StandInStream:
    """A CUDA stream stand-in for CPU: every wait is a no-op (gloo collectives are synchronous)."""

    def wait_stream(self, _other):
        pass

    def wait_event(self, _event):
        pass

    def synchronize(self):
        pass

    def record_event(self, event=None):
        return event or _StandInEvent()


class _StandInEvent:
    def record(self, _stream=None):
        pass

    def synchronize(self):
        pass

    def wait(self, _stream=None):
        pass

    def query(self):
        return True


def allow_fsdp_on_cpu():
    """See [Note: FSDP on CPU in PyTorch 1.13]."""
    import torch.distributed.fsdp.flat_param as flat_param_module
    import torch.distributed.fsdp.fully_sharded_data_parallel as fsdp_module

    class _CudaShim:
        def __getattr__(self, name):
            return getattr(torch.cuda, name)

        @staticmethod
        def is_available():
            return True

        Stream = _StandInStream
        Event = _StandInEvent

        @staticmethod
        def stream(_stream):
            return contextlib.nullcontext()

        @staticmethod
        def current_stream():
            return _StandInStream()

        @staticmethod
        def synchronize():
            pass

    class _TorchShim:
        def __getattr__(self, name):
            return getattr(torch, name)

        cuda = _CudaShim()

    fsdp_module.torch = _TorchShim()
    flat_param_module.torch = _TorchShim()
    # The compute device is always CUDA in 1.13; here it is the CPU the parameters live on.
    fsdp_module.FullyShardedDataParallel._get_compute_device = lambda *_: torch.device('cpu')
    # Gloo in 1.13 has no all-gather into one tensor and no reduce-scatter. All-gather into the
    # chunks of the output (the same bytes on the wire); reduce-scatter as an all-reduce of the
    # input followed by taking this rank's chunk (twice the bytes of a ring reduce-scatter).
    def all_gather_base(output, input, group=None, async_op=False):
        dist.all_gather(list(output.chunk(dist.get_world_size(group))), input, group=group)

    def reduce_scatter_base(output, input, group=None, async_op=False):
        dist.all_reduce(input, group=group)
        output.copy_(input.chunk(dist.get_world_size(group))[dist.get_rank(group)])

    dist._all_gather_base = all_gather_base
    dist._reduce_scatter_base = reduce_scatter_base
    # record_stream on a CPU tensor raises; FSDP only calls it to keep CUDA memory alive.
    torch.Tensor.record_stream = lambda self, stream: None


def import_fsdp():
    """Imports torch.distributed.fsdp on Python 3.11 (see the note above)."""
    import copy
    import dataclasses

    original = dataclasses._get_field

    def get_field(cls, name, annotation, *rest):
        default = cls.__dict__.get(name, dataclasses.MISSING)
        if isinstance(default, dataclasses.Field) and dataclasses.is_dataclass(default.default):
            value = default.default
            setattr(cls, name, dataclasses.field(default_factory=lambda: copy.copy(value)))
        return original(cls, name, annotation, *rest)

    dataclasses._get_field = get_field
    try:
        import torch.distributed.fsdp as fsdp
    finally:
        dataclasses._get_field = original
    return fsdp


class JobCpu:
    """job-cpu.ts's accounting of a job's CPU per step, the same files read the same way
    (see [Note: job CPU accounting] there)."""

    TICK_MS = 10

    def __init__(self, spec):
        self.namespaces = {f'net:[{os.stat(path).st_ino}]' for path in spec['namespaces']}
        self.busy = None if spec.get('busyPid') is None else str(spec['busyPid'])
        self.tracked = None
        self.ksoftirqd = []

    @staticmethod
    def process_ms(pid):
        try:
            with open(f'/proc/{pid}/stat') as file:
                text = file.read()
        except OSError:
            return 0
        fields = text[text.rindex(')') + 2:].split(' ')
        return (int(fields[11]) + int(fields[12])) * JobCpu.TICK_MS

    @staticmethod
    def machine():
        with open('/proc/stat') as file:
            user, nice, system, idle, iowait, irq, softirq = map(int, file.readline().split()[1:8])
        tick = JobCpu.TICK_MS
        return {'busyMs': (user + nice + system + irq + softirq) * tick,
                'softirqMs': (irq + softirq) * tick, 'idleMs': (idle + iowait) * tick}

    def discover(self):
        self.tracked, self.ksoftirqd = [], []
        for pid in filter(str.isdigit, os.listdir('/proc')):
            try:
                with open(f'/proc/{pid}/comm') as file:
                    comm = file.read().strip()
                if comm.startswith('ksoftirqd/'):
                    self.ksoftirqd.append(pid)
                    continue
                if pid == self.busy or os.readlink(f'/proc/{pid}/ns/net') not in self.namespaces:
                    continue
                with open(f'/proc/{pid}/cmdline', 'rb') as file:
                    argv = file.read().decode(errors='replace').split('\0')
                launcher = any(re.search(r'(^|/)fsdp-run(\.[cm]?[jt]s)?$', argument) for argument in argv)
                kind = 'launcher' if launcher else 'rank'
                self.tracked.append((pid, kind))
            except OSError:
                pass

    def read(self):
        if self.tracked is None:
            self.discover()
        return ({pid: self.process_ms(pid) for pid, _ in self.tracked},
                0 if self.busy is None else self.process_ms(self.busy),
                sum(self.process_ms(pid) for pid in self.ksoftirqd), self.machine())

    def begin(self, discover=False):
        if discover:
            self.tracked = None
        self.start = self.read()

    def end(self):
        (processes, busy, ksoftirqd, machine), (p0, b0, k0, m0) = self.read(), self.start
        by_kind = {}
        for pid, kind in self.tracked:
            by_kind[kind] = by_kind.get(kind, 0) + max(0, processes[pid] - p0[pid])
        return {'jobMs': sum(by_kind.values()), 'byKind': by_kind, 'ksoftirqdMs': ksoftirqd - k0,
                'busyMs': max(0, busy - b0), 'machine': {key: machine[key] - m0[key] for key in machine}}


def init_weights(model):
    """GPT-2 init, as @fsdp-ts/nn: normal(0, 0.02) weights and embeddings, zero biases."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith('Norm.weight'):
                parameter.fill_(1)
            elif name.endswith('bias'):
                parameter.zero_()
            else:
                parameter.normal_(0, 0.02)


def rank_main(rank, c, port, queue):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if c.get('flushDenormal'):
        torch.set_flush_denormal(True)
    world = c['worldSize']
    mode = c['mode']
    if mode != 'single':
        if port is not None:
            os.environ['MASTER_ADDR'] = '127.0.0.1'
            os.environ['MASTER_PORT'] = str(port)
        dist.init_process_group('gloo', rank=rank, world_size=world)
    model = GPT(c)
    init_weights(model)
    if mode == 'ddp':
        model = torch.nn.parallel.DistributedDataParallel(model)
    elif mode == 'fsdp':
        import functools

        fsdp = import_fsdp()
        from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

        FSDP, ShardingStrategy = fsdp.FullyShardedDataParallel, fsdp.ShardingStrategy
        allow_fsdp_on_cpu()
        policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})
        model = FSDP(model, auto_wrap_policy=policy, sharding_strategy=ShardingStrategy.FULL_SHARD)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    count = c['batch'] * c['seqLen']
    # The TypeScript ranks' tokens: (index * 7919 + rank * 31) % vocab.
    tokens = ((torch.arange(count) * 7919 + rank * 31) % c['vocabSize']).view(c['batch'], c['seqLen'])
    targets = (tokens + 1) % c['vocabSize']
    step_ms, cpu_ms, wire_bytes = [], [], []
    # BENCH_WIRE_COUNTER (bench/cluster): the veth's tx_bytes file in this rank's namespace.
    counter = os.environ.get('BENCH_WIRE_COUNTER')
    # BENCH_JOB_CPU (bench/cluster): rank 0 counts every process of the job per step.
    job_cpu = JobCpu(json.loads(os.environ['BENCH_JOB_CPU'])) if os.environ.get('BENCH_JOB_CPU') and rank == 0 else None
    job_samples = []

    def sent_bytes():
        if counter is None:
            return 0
        with open(counter) as file:
            return int(file.read())

    for step in range(c['warmupSteps'] + c['measuredSteps']):
        if mode != 'single':
            dist.barrier()
        wire_start = sent_bytes()
        if job_cpu is not None:
            job_cpu.begin(step < c['warmupSteps'])
        start, cpu_start = time.perf_counter(), time.process_time()
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(tokens).view(-1, c['vocabSize']), targets.view(-1))
        loss.backward()
        optimizer.step()
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        job_sample = None if job_cpu is None else job_cpu.end()
        if step >= c['warmupSteps']:
            step_ms.append(elapsed * 1000)
            cpu_ms.append(cpu * 1000)
            if job_sample is not None:
                job_samples.append(job_sample)
            if counter is not None:
                wire_bytes.append(sent_bytes() - wire_start)
    result = {'stepMs': step_ms, 'cpuMs': cpu_ms, 'torch': torch.__version__, 'loss': float(loss)}
    if counter is not None:
        result['wireBytes'] = wire_bytes
    if job_cpu is not None:
        result['jobCpu'] = job_samples
    if rank == 0 and queue is None:
        print(json.dumps(result))
    elif rank == 0:
        queue.put(result)
    if mode != 'single':
        dist.barrier()
        dist.destroy_process_group()


def main():
    c = json.loads(sys.argv[1])
    if 'BENCH_TORCH_RANK' in os.environ:
        # One rank of a job spread over hosts (bench/cluster): MASTER_ADDR and MASTER_PORT come
        # from the environment, this process is rank BENCH_TORCH_RANK, and rank 0 prints the result.
        rank_main(int(os.environ['BENCH_TORCH_RANK']), c, None, None)
        return
    world = 1 if c['mode'] == 'single' else c['worldSize']
    context = mp.get_context('spawn')
    queue = context.Queue()
    import socket

    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]
    if world == 1:
        rank_main(0, c, port, queue)
    else:
        processes = [context.Process(target=rank_main, args=(rank, c, port, queue)) for rank in range(world)]
        for process in processes:
            process.start()
        result = queue.get(timeout=900)
        for process in processes:
            process.join(timeout=120)
            if process.exitcode not in (0, None):
                raise SystemExit(f'rank exited with {process.exitcode}')
        print(json.dumps(result))
        return
    print(json.dumps(queue.get()))


if __name__ == '__main__':
    main()
