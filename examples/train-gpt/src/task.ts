/** One training batch: token ids, next-token targets and a 0/1 mask of the positions the loss counts. */
export interface Batch {
  readonly tokens: Int32Array; // [batch, seqLen]
  readonly targets: Int32Array; // [batch, seqLen]
  readonly mask: Float32Array; // [batch, seqLen]
  readonly batch: number;
  readonly seqLen: number;
}

/** Greedy continuation of a batch of equal-length prompts by `count` tokens (collective under FSDP). */
export type Continue = (prompts: Int32Array[], count: number) => Int32Array[];

/** Next-token logits' argmax and the mean masked loss for a batch (collective under FSDP). */
export type Score = (batch: Batch) => { loss: number; correct: number; counted: number };

export interface Evaluation {
  /** The exact metric in [0, 1] (higher is better), summed over this rank's share. */
  readonly correct: number;
  readonly total: number;
  readonly metricName: string;
  /** A few human-readable lines showing prompts and the model's answers (rank 0 prints them). */
  readonly samples: string[];
}

/** What the training loop needs from a data source. */
export interface Task {
  readonly name: string;
  readonly vocabSize: number;
  /** Model input length (the GPT's seqLen). */
  readonly seqLen: number;
  trainBatch(step: number, rank: number, batch: number): Batch;
  /** Evaluates this rank's share of a fixed held-out set; every rank must call it together. */
  evaluate(rank: number, worldSize: number, tools: { continue: Continue; score: Score }): Evaluation;
  /** Short generations for the report (every rank calls it; rank 0 prints). */
  generate(tools: { continue: Continue }): string[];
}
