/**
 * The PyTorch peer rows of the FSDP benchmark: torch-fsdp-training.py run with Debian's
 * /usr/bin/python3 (python3-torch), one thread per rank, same model, batch and tokens.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { GPTConfig } from '@fsdp-ts/nn';
import { type RunResult, spread } from './bench-config';

export type TorchMode = 'single' | 'ddp' | 'fsdp';

const script = fileURLToPath(new URL('./torch-fsdp-training.py', import.meta.url));
const python = process.env.BENCH_PYTHON ?? '/usr/bin/python3';
const environment = { ...process.env, OPENBLAS_NUM_THREADS: '1', OMP_NUM_THREADS: '1' };

/** null when torch imports; otherwise why the PyTorch rows are skipped. */
export function torchUnavailableReason(): string | null {
  const probe = spawnSync(python, ['-c', 'import torch; print(torch.__version__)'], {
    encoding: 'utf8',
    env: environment,
    timeout: 60_000,
  });
  if (probe.status === 0) return null;
  return `${python} cannot import torch (${(probe.stderr || probe.error?.message || 'no output').trim().split('\n').at(-1)}); on Debian: apt-get install python3-torch libopenblas0-pthread`;
}

interface TorchOutput {
  stepMs: number[];
  cpuMs: number[];
  torch: string;
}

/** One PyTorch row (W ranks over gloo, or one process for 'single'). */
export function runTorch(
  mode: TorchMode,
  config: GPTConfig,
  setting: { batch: number; seqLen: number; warmupSteps: number; measuredSteps: number },
  worldSize: number,
): RunResult {
  const request = {
    mode,
    worldSize,
    vocabSize: config.vocabSize,
    dModel: config.dModel,
    nLayers: config.nLayers,
    nHeads: config.nHeads,
    seqLen: setting.seqLen,
    batch: setting.batch,
    warmupSteps: setting.warmupSteps,
    measuredSteps: setting.measuredSteps,
  };
  const child = spawnSync(python, [script, JSON.stringify(request)], {
    encoding: 'utf8',
    env: environment,
    timeout: 900_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  const line = child.stdout.trim().split('\n').at(-1) ?? '';
  if (child.status !== 0 || !line.startsWith('{'))
    throw new Error(`PyTorch ${mode} failed (status ${child.status}):\n${child.stdout}\n${child.stderr}`);
  const output = JSON.parse(line) as TorchOutput;
  const ranks = mode === 'single' ? 1 : worldSize;
  return torchResult(`torch-${mode}`, ranks, output.stepMs, output.cpuMs, setting.batch * setting.seqLen);
}

/** A RunResult from step samples (also used to pool rows of several rounds). */
export function torchResult(
  kind: RunResult['kind'],
  worldSize: number,
  stepSamples: number[],
  cpuSamples: number[],
  tokensPerRank: number,
): RunResult {
  const stepMs = spread(stepSamples);
  const tokensPerStep = worldSize * tokensPerRank;
  const zero = { min: 0, median: 0, max: 0 };
  return {
    kind,
    worldSize,
    parameters: 0,
    largestUnitNumel: 0,
    units: 0,
    tokensPerSecond: {
      min: (tokensPerStep * 1000) / stepMs.max,
      median: (tokensPerStep * 1000) / stepMs.median,
      max: (tokensPerStep * 1000) / stepMs.min,
    },
    stepMs,
    stepSamples,
    cpuSamples,
    cpuMs: spread(cpuSamples),
    allGatherWaitMs: zero,
    reductionWaitMs: zero,
    peak: { storageBytes: 0, optimizerBytes: 0, tfBytes: 0, parametersGradientsOptimizerBytes: 0 },
    losses: [],
  };
}
