import { readFileSync } from 'node:fs';
import { seededRandom, streamSeed } from './random';
import type { Batch, Continue, Evaluation, Score, Task } from './task';

const EVALUATION_WINDOWS = 64;

/**
 * Byte-level language modelling on any UTF-8 file: the first 90% trains, the last 10% is held
 * out. The metric is next-byte accuracy on fixed held-out windows; generations continue held-out
 * text greedily.
 */
export class TextTask implements Task {
  readonly name: string;
  readonly vocabSize = 256;
  private readonly train: Uint8Array;
  private readonly heldOut: Uint8Array;

  constructor(
    file: string,
    readonly seqLen: number,
  ) {
    const bytes = new Uint8Array(readFileSync(file));
    if (bytes.length < 4 * (seqLen + 1)) {
      throw new Error(
        `--data ${file}: ${bytes.length} bytes; expected at least ${4 * (seqLen + 1)} for seqLen ${seqLen}. Pass a longer file or a smaller --seq-len.`,
      );
    }
    const cut = Math.max(seqLen + 1, Math.floor(bytes.length * 0.9));
    this.train = bytes.subarray(0, Math.min(cut, bytes.length - (seqLen + 1)));
    this.heldOut = bytes.subarray(this.train.length);
    this.name = `bytes of ${file} (${bytes.length} bytes)`;
  }

  private windows(source: Uint8Array, starts: number[]): Batch {
    const { seqLen } = this;
    const tokens = new Int32Array(starts.length * seqLen);
    const targets = new Int32Array(starts.length * seqLen);
    starts.forEach((start, row) => {
      for (let position = 0; position < seqLen; position++) {
        tokens[row * seqLen + position] = source[start + position]!;
        targets[row * seqLen + position] = source[start + position + 1]!;
      }
    });
    return {
      tokens,
      targets,
      mask: new Float32Array(starts.length * seqLen).fill(1),
      batch: starts.length,
      seqLen,
    };
  }

  trainBatch(step: number, rank: number, batch: number): Batch {
    const random = seededRandom(streamSeed(step, rank, 2));
    const span = this.train.length - this.seqLen - 1;
    return this.windows(
      this.train,
      Array.from({ length: batch }, () => Math.floor(random() * Math.max(1, span))),
    );
  }

  private evaluationStarts(): number[] {
    const span = Math.max(1, this.heldOut.length - this.seqLen - 1);
    return Array.from({ length: EVALUATION_WINDOWS }, (_, index) =>
      Math.floor((index * span) / EVALUATION_WINDOWS),
    );
  }

  evaluate(rank: number, worldSize: number, tools: { score: Score }): Evaluation {
    const starts = this.evaluationStarts().filter((_, index) => index % worldSize === rank);
    const { correct, counted } = tools.score(this.windows(this.heldOut, starts));
    return { correct, total: counted, metricName: 'held-out next-byte accuracy', samples: [] };
  }

  generate(tools: { continue: Continue }): string[] {
    const promptLength = Math.min(32, Math.floor(this.seqLen / 2));
    const starts = this.evaluationStarts().slice(0, 3);
    const prompts = starts.map((start) =>
      Int32Array.from(this.heldOut.subarray(start, start + promptLength)),
    );
    const outputs = tools.continue(prompts, this.seqLen - promptLength);
    const decoder = new TextDecoder('utf-8', { fatal: false });
    return prompts.map(
      (prompt, index) =>
        `${JSON.stringify(decoder.decode(Uint8Array.from(prompt)))} → ${JSON.stringify(decoder.decode(Uint8Array.from(outputs[index]!)))}`,
    );
  }
}
