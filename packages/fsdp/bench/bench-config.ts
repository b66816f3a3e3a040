/** What one benchmark run measures (passed to each rank as JSON). */
import type { GPTConfig } from '@fsdp-ts/nn';
import type { JobCpuSample } from './job-cpu';
import type { PhaseSamples } from './phase-profile';

export type RunKind =
  | 'single' // one process, unwrapped GPT, AdamW over its parameters
  // Two 'single' steps at once, one per rank of a W=2 launch, unwrapped and never communicating
  // (each step starts and ends at a barrier): the ceiling of any two-rank row on this machine.
  | 'two-singles'
  | 'no-shard'
  | 'no-shard-unflat'
  | 'shard-grad-op'
  | 'full-shard'
  | 'full-shard-recompute' // activationCheckpointing: true (every unit recomputed in backward)
  | 'full-shard-unflat'
  | 'full-shard-flat-optimizer' // AdamW over each unit's flat shard (one Parameter per flat buffer)
  | 'full-shard-submodule-optimizer' // AdamW with one param group per submodule, from model.module.<sub>.parameters()
  | 'hybrid-shard' // full-shard within each host (LOCAL_WORLD_SIZE ranks), replicated across hosts (bench/cluster)
  // PyTorch 1.13 peers (torch-fsdp-training.py; not run by training-rank.ts):
  | 'torch-single'
  | 'torch-ddp'
  | 'torch-fsdp';

export interface RunRequest {
  kind: RunKind;
  config: GPTConfig;
  batch: number;
  seqLen: number;
  warmupSteps: number;
  measuredSteps: number;
  /** Record the per-phase profile (see [Note: phase profile]). */
  profilePhases?: boolean;
  /** Communication dtypes (FSDP's mixedPrecision); bench/cluster's bfloat16-on-the-wire rows. */
  mixedPrecision?: { paramDtype?: 'bfloat16' | 'float32'; reduceDtype?: 'bfloat16' | 'float32' };
  /** Rank 0 writes its RunResult here. */
  output: string;
}

export interface Spread {
  min: number;
  median: number;
  max: number;
}

export interface MemorySample {
  /** Live Storage bytes of every flat handle (sharded and gathered params and grads). */
  storageBytes: number;
  /** Optimizer state bytes (typed arrays in its state dict). */
  optimizerBytes: number;
  /** tf.memory().numBytes (activations, tensors made from parameter views, gradients in flight). */
  tfBytes: number;
}

export interface RunResult {
  kind: RunKind;
  worldSize: number;
  parameters: number;
  largestUnitNumel: number;
  units: number;
  tokensPerSecond: Spread;
  stepMs: Spread;
  /** Every measured step's wall time and rank 0's CPU time (rows of several rounds are pooled). */
  stepSamples: number[];
  cpuSamples: number[];
  /**
   * CPU time of rank 0's process per step (all its threads). Less sensitive than wall time to
   * other processes competing for the cores; blocking waits cost none.
   */
  cpuMs: Spread;
  allGatherWaitMs: Spread;
  reductionWaitMs: Spread;
  /** Peak over the sampled points of the measured steps (per rank, rank 0 reported). */
  peak: MemorySample & { parametersGradientsOptimizerBytes: number };
  /**
   * Rank 0's pooled-storage allocations during the measured steps, served from the pool or fresh
   * (see [Note: storage pool]); rows of one launch share the pool, so this is all of them.
   */
  storagePool?: { reused: number; fresh: number };
  losses: number[];
  /** With BENCH_WIRE_COUNTER (bench/cluster): bytes rank 0's host sent during each measured step. */
  wireBytesSamples?: number[];
  /** With BENCH_JOB_CPU (bench/cluster): every process of the job per measured step (job-cpu.ts). */
  jobCpuSamples?: JobCpuSample[];
  /** With BENCH_CPU_PROFILE: each measured step's [start, end] in the profile's µs clock. */
  profileWindowsUs?: [number, number][];
  /** When profiled: rank 0's per-step CPU by phase and thread (see [Note: phase profile]). */
  phases?: PhaseSamples;
}

export function spread(values: readonly number[]): Spread {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    min: sorted[0] ?? Number.NaN,
    median: sorted[Math.floor(sorted.length / 2)] ?? Number.NaN,
    max: sorted.at(-1) ?? Number.NaN,
  };
}
