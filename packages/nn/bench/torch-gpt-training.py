"""PyTorch reference for bench/gpt-training.ts: the same GPT, batches and AdamW on one CPU thread.

Served over stdin/stdout so the TypeScript benchmark can interleave it with fsdp-ts in one run:
each input line "BATCH SEQ STEPS" runs STEPS training steps at that shape (a model per shape,
built and warmed up on first use) and prints one JSON line
{"stepMs": [...], "cpuMs": [...], "torch": version, "blas": [mapped BLAS libraries]}.
An empty line or EOF ends it. OPENBLAS_NUM_THREADS=1 is set by the caller; this sets
torch.set_num_threads(1), and torch.set_flush_denormal(True) when BENCH_TORCH_FLUSH_DENORMAL=1.
"""
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
if os.environ.get('BENCH_TORCH_FLUSH_DENORMAL') == '1':
    torch.set_flush_denormal(True)
VOCAB, D, LAYERS, HEADS, MAX_T = 256, 256, 4, 4, 128


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attentionNorm = torch.nn.LayerNorm(D)
        self.qkv = torch.nn.Linear(D, 3 * D)
        self.out = torch.nn.Linear(D, D)
        self.mlpNorm = torch.nn.LayerNorm(D)
        self.up = torch.nn.Linear(D, 4 * D)
        self.down = torch.nn.Linear(4 * D, D)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.attentionNorm(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, HEADS, d // HEADS).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // HEADS)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        mixed = (scores.masked_fill(mask, float('-inf')).softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.out(mixed)
        return x + self.down(F.gelu(self.up(self.mlpNorm(x)), approximate='tanh'))


class GPT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tokenEmbedding = torch.nn.Embedding(VOCAB, D)
        self.positionEmbedding = torch.nn.Embedding(MAX_T, D)
        self.blocks = torch.nn.ModuleList([Block() for _ in range(LAYERS)])
        self.finalNorm = torch.nn.LayerNorm(D)
        self.lmHead = torch.nn.Linear(D, VOCAB, bias=False)
        self.lmHead.weight = self.tokenEmbedding.weight

    def forward(self, tokens):
        x = self.tokenEmbedding(tokens) + self.positionEmbedding(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.lmHead(self.finalNorm(x))


def blas_libraries():
    """The BLAS shared objects this process mapped (Debian's torch links the generic libblas.so.3)."""
    with open('/proc/self/maps') as maps:
        paths = {line.split()[-1] for line in maps if 'blas' in line.lower()}
    return sorted(paths)


def make_trainer(batch, seq):
    torch.manual_seed(0)
    model = GPT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    tokens = (torch.arange(batch * seq) * 7919 % VOCAB).view(batch, seq)
    targets = (tokens + 1) % VOCAB

    def step():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(tokens).view(-1, VOCAB), targets.view(-1))
        loss.backward()
        optimizer.step()

    for _ in range(3):
        step()
    return step


trainers = {}
for line in sys.stdin:
    if line.strip() == '':
        break
    batch, seq, steps = (int(field) for field in line.split())
    if (batch, seq) not in trainers:
        trainers[(batch, seq)] = make_trainer(batch, seq)
    step = trainers[(batch, seq)]
    step_ms, cpu_ms = [], []
    for _ in range(steps):
        start, cpu_start = time.perf_counter(), time.process_time()
        step()
        step_ms.append((time.perf_counter() - start) * 1000)
        cpu_ms.append((time.process_time() - cpu_start) * 1000)
    print(json.dumps({'stepMs': step_ms, 'cpuMs': cpu_ms, 'torch': torch.__version__, 'blas': blas_libraries()}), flush=True)
