/** One training step as rank 0 reports it. */
export interface StepRecord {
  step: number;
  loss: number;
  lr: number;
  stepMs: number;
  tokensPerSecond: number;
  communicationWaitMs: number;
}

/** One periodic evaluation. */
export interface EvaluationRecord {
  step: number;
  metric: number;
  correct: number;
  total: number;
}

/** Everything the report, the plot and the tests read (written as metrics.json). */
export interface RunSummary {
  task: string;
  metricName: string;
  worldSize: number;
  strategy: string;
  flattenParameters: boolean;
  backend: string;
  parameters: number;
  config: {
    dModel: number;
    layers: number;
    heads: number;
    seqLen: number;
    vocabSize: number;
    batchPerRank: number;
  };
  steps: StepRecord[];
  evaluations: EvaluationRecord[];
  samples: string[];
  wallSeconds: number;
  finishedAt: string;
}

/** Lines rank 0 prints for the launcher side (main.ts) to render: `@@train-gpt <kind> <json>`. */
export const MESSAGE_PREFIX = '@@train-gpt ';

export type ProgressMessage =
  | {
      kind: 'start';
      totalSteps: number;
      task: string;
      parameters: number;
      worldSize: number;
      strategy: string;
      /** The process group's backend ('tcp' under fsdp-run, 'mpi' under mpirun or srun --mpi). */
      collectivesBackend: string;
    }
  | { kind: 'resumed'; step: number; path: string }
  | { kind: 'step'; record: StepRecord; totalSteps: number; elapsedSeconds: number }
  | { kind: 'evaluation'; record: EvaluationRecord; metricName: string; samples: string[] }
  | {
      kind: 'done';
      out: string;
      summary: { finalLoss: number; firstLoss: number; finalMetric: number; firstMetric: number };
    };

export function encodeMessage(message: ProgressMessage): string {
  return `${MESSAGE_PREFIX}${JSON.stringify(message)}\n`;
}

/** Parses a line of worker output (with or without the launcher's `[rank R] ` prefix). */
export function decodeMessage(line: string): ProgressMessage | undefined {
  const at = line.indexOf(MESSAGE_PREFIX);
  if (at < 0) return undefined;
  try {
    return JSON.parse(line.slice(at + MESSAGE_PREFIX.length)) as ProgressMessage;
  } catch {
    return undefined;
  }
}
