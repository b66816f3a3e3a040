/** Shapes, requests and results of `npm run bench:scale` (scale-bench.ts drives, scale-rank.ts runs). */
import type { GPTConfig } from '@fsdp-ts/nn';

export type ScaleStrategy = 'single' | 'no-shard' | 'full-shard';

/** GPT-2 shapes with a byte-level vocabulary (256) and 64 positions. */
export const scaleModels = {
  '10M': { vocabSize: 256, dModel: 384, nLayers: 6, nHeads: 6, seqLen: 64, seed: 0 },
  '100M': { vocabSize: 256, dModel: 768, nLayers: 14, nHeads: 12, seqLen: 64, seed: 0 },
  '350M': { vocabSize: 256, dModel: 1024, nLayers: 28, nHeads: 16, seqLen: 64, seed: 0 },
  '1.3B': { vocabSize: 256, dModel: 2048, nLayers: 26, nHeads: 16, seqLen: 64, seed: 0 },
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
  /** Build the model inside nn's deferredInit (FSDP runs; a single process builds it whole). */
  deferred: boolean;
  batch: number;
  seqLen: number;
  warmupSteps: number;
  measuredSteps: number;
  checkpointDirectory?: string;
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
  }[];
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
