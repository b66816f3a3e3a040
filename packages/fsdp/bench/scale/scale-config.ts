/** Shapes, requests and results of `npm run bench:scale` (scale-bench.ts drives, scale-rank.ts runs). */
import type { OffloadStatistics } from '@fsdp-ts/fsdp';
import type { GPTConfig } from '@fsdp-ts/nn';

export type ScaleStrategy = 'single' | 'no-shard' | 'full-shard';

/** FSDP's `offload` option without its directory (the run gives each row its own). */
export interface ScaleOffload {
  optimizerState?: 'none' | 'memory' | 'disk';
  parameters?: 'none' | 'disk';
}

/** GPT-2 shapes with a byte-level vocabulary (256) and 64 positions. */
export const scaleModels = {
  '10M': { vocabSize: 256, dModel: 384, nLayers: 6, nHeads: 6, seqLen: 64, seed: 0 },
  '100M': { vocabSize: 256, dModel: 768, nLayers: 14, nHeads: 12, seqLen: 64, seed: 0 },
  '350M': { vocabSize: 256, dModel: 1024, nLayers: 28, nHeads: 16, seqLen: 64, seed: 0 },
  '1.3B': { vocabSize: 256, dModel: 2048, nLayers: 26, nHeads: 16, seqLen: 64, seed: 0 },
  // The offload stretch row (16·P ≈ 40 GiB, more than the test machine's memory).
  '2.7B': { vocabSize: 256, dModel: 2560, nLayers: 34, nHeads: 20, seqLen: 64, seed: 0 },
  // Validates the offload rows end to end in a minute (BENCH_SCALE_OFFLOAD_MODEL=20M).
  '20M': { vocabSize: 256, dModel: 512, nLayers: 6, nHeads: 8, seqLen: 64, seed: 0 },
} satisfies Record<string, GPTConfig>;
export type ScaleModelName = keyof typeof scaleModels;

/** Parameters of nn's GPT (tied embeddings): embeddings, per block 12d² + 13d, final LayerNorm. */
export function gptParameterCount(config: GPTConfig): number {
  const d = config.dModel;
  return config.vocabSize * d + config.seqLen * d + config.nLayers * (12 * d * d + 13 * d) + 2 * d;
}

/** Elements of one TransformerBlock (the largest unit) and of the root unit (embeddings + final norm). */
export function gptUnitSizes(config: GPTConfig): { block: number; root: number } {
  const d = config.dModel;
  return { block: 12 * d * d + 13 * d, root: config.vocabSize * d + config.seqLen * d + 2 * d };
}

export interface ScaleRunRequest {
  model: ScaleModelName;
  config: GPTConfig;
  strategy: ScaleStrategy;
  worldSize: number;
  /** --memory-per-rank in bytes, or none. */
  capBytes?: number;
  /** FSDP's activationCheckpointing: recompute each block's forward in backward (keeps only unit inputs). */
  activationCheckpointing: boolean;
  /** FSDP's backwardPrefetch (default true); false gathers each unit only when its backward needs it. */
  backwardPrefetch?: boolean;
  /** FSDP's forwardPrefetch (default true); false gathers each unit only when its forward needs it. */
  forwardPrefetch?: boolean;
  /** Build the model inside nn's deferredInit (FSDP runs; a single process builds it whole). */
  deferred: boolean;
  batch: number;
  seqLen: number;
  warmupSteps: number;
  measuredSteps: number;
  checkpointDirectory?: string;
  /** FSDP's offload option, with the directory this run's ranks write under. */
  offload?: ScaleOffload & { directory: string };
  /**
   * Every rank measures the disk at once before and after training (disk-rate.ts): `bytes`
   * written under `directory` (8 MiB writes, fdatasync every 64 MiB, fsync) and read back uncached.
   */
  diskProbe?: { bytes: number; directory: string };
  /** Each rank writes `<output>.rank<R>.json`. */
  output: string;
}

export interface ScaleRankResult {
  rank: number;
  /** RSS after initBackend: Node + tfjs + the wasm module, before any model. */
  runtimeRssBytes: number;
  peakRssBytes: number;
  /** Largest RSS seen at the end of each phase (built, wrapped, first backward, …). */
  phaseRssBytes: Record<string, number>;
  /** FSDP's own estimate (parameters + gradients + Adam state + gathered units); none for 'single'. */
  estimateBytes: number | undefined;
  parameters: number;
  /** Whether the model was built inside deferredInit (values made per rank while wrapping). */
  deferred: boolean;
  /**
   * Bytes of the storages this rank's parameters and gradients point at, and of the optimizer's
   * state arrays, after the first optimizer step (live bytes, not RSS).
   */
  trainingStateBytes: { parameters: number; gradients: number; optimizer: number };
  initMs: number;
  wrapMs: number;
  scriptStartMs: number;
  firstStepAtMs: number;
  steps: {
    loss: number;
    stepMs: number;
    /** CPU time of the rank's process (all its threads) during the step. */
    cpuMs: number;
    computeMs: number;
    allGatherWaitMs: number;
    reductionWaitMs: number;
    optimizerMs: number;
    /** FSDP's offloadStatistics after the step (the offload's I/O time and bytes), when offloading. */
    offload?: OffloadStatistics;
    /** This process's storage I/O during the step (/proc/self/io read_bytes, write_bytes). */
    storageReadBytes: number;
    storageWrittenBytes: number;
  }[];
  /** The disk probe before and after training (every rank at once, between barriers), ms. */
  diskProbe?: { bytes: number; writeMs: number[]; readMs: number[] };
  /**
   * Save and load between barriers (every rank at once), and the disk measured right before and
   * after the save the same way: every rank writing `diskBytesPerRank` (its checkpoint file's
   * size) at once (disk-rate.ts).
   */
  checkpoint:
    | {
        saveMs: number;
        loadMs: number;
        /** Bytes of the whole checkpoint directory (every rank's files). */
        bytes: number;
        diskBeforeMs: number;
        diskAfterMs: number;
        diskBytesPerRank: number;
      }
    | undefined;
}
