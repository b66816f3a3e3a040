import { seededRandom, streamSeed } from './random';
import type { Batch, Continue, Evaluation, Task } from './task';

const ALPHABET = '0123456789+=';
const EVALUATION_SET_SIZE = 512;

/**
 * Multi-digit addition written as text: `07+48=550` for 7 + 48 = 55. Operands are zero-padded to
 * `digits` digits; the sum is written with digits + 1 digits, least significant first (the order in
 * which a person adds, so every answer digit depends only on digits and a carry already seen).
 * The loss counts only the answer digits; the metric is exact-match accuracy of greedy answers on a
 * fixed held-out set of problems that training never sees.
 */
export class AdditionTask implements Task {
  readonly name: string;
  readonly vocabSize = ALPHABET.length;
  readonly seqLen: number;
  private readonly promptLength: number;
  private readonly answerLength: number;
  private readonly limit: number;
  private readonly heldOut: Set<number>;
  private readonly evaluationProblems: [number, number][];

  constructor(readonly digits: number) {
    this.name = `${digits}-digit addition`;
    this.promptLength = 2 * digits + 2;
    this.answerLength = digits + 1;
    this.seqLen = this.promptLength + this.answerLength - 1;
    this.limit = 10 ** digits;
    const random = seededRandom(streamSeed(0xadd, digits));
    this.heldOut = new Set();
    this.evaluationProblems = [];
    const size = Math.min(EVALUATION_SET_SIZE, Math.floor((this.limit * this.limit) / 10));
    while (this.evaluationProblems.length < size) {
      const a = Math.floor(random() * this.limit);
      const b = Math.floor(random() * this.limit);
      if (this.heldOut.has(a * this.limit + b)) continue;
      this.heldOut.add(a * this.limit + b);
      this.evaluationProblems.push([a, b]);
    }
  }

  encode(text: string): number[] {
    return [...text].map((character) => ALPHABET.indexOf(character));
  }

  decode(ids: ArrayLike<number>): string {
    return Array.from(ids, (id) => ALPHABET[id] ?? '?').join('');
  }

  prompt(a: number, b: number): string {
    return `${String(a).padStart(this.digits, '0')}+${String(b).padStart(this.digits, '0')}=`;
  }

  answer(a: number, b: number): string {
    return [...String(a + b).padStart(this.answerLength, '0')].reverse().join('');
  }

  trainBatch(step: number, rank: number, batch: number): Batch {
    const random = seededRandom(streamSeed(step, rank, 1));
    const tokens = new Int32Array(batch * this.seqLen);
    const targets = new Int32Array(batch * this.seqLen);
    const mask = new Float32Array(batch * this.seqLen);
    for (let row = 0; row < batch; row++) {
      let a: number;
      let b: number;
      do {
        a = Math.floor(random() * this.limit);
        b = Math.floor(random() * this.limit);
      } while (this.heldOut.has(a * this.limit + b));
      const ids = this.encode(this.prompt(a, b) + this.answer(a, b));
      for (let position = 0; position < this.seqLen; position++) {
        const offset = row * this.seqLen + position;
        tokens[offset] = ids[position]!;
        targets[offset] = ids[position + 1]!;
        mask[offset] = position >= this.promptLength - 1 ? 1 : 0;
      }
    }
    return { tokens, targets, mask, batch, seqLen: this.seqLen };
  }

  evaluate(rank: number, worldSize: number, tools: { continue: Continue }): Evaluation {
    const share = this.evaluationProblems.filter((_, index) => index % worldSize === rank);
    const prompts = share.map(([a, b]) => Int32Array.from(this.encode(this.prompt(a, b))));
    const outputs = tools.continue(prompts, this.answerLength);
    let correct = 0;
    const samples: string[] = [];
    share.forEach(([a, b], index) => {
      const written = this.decode(outputs[index]!);
      const right = written === this.answer(a, b);
      if (right) correct += 1;
      if (samples.length < 6) samples.push(this.describe(a, b, written, right));
    });
    return { correct, total: share.length, metricName: 'exact-match accuracy', samples };
  }

  generate(tools: { continue: Continue }): string[] {
    const problems: [number, number][] = this.evaluationProblems.slice(0, 8);
    const outputs = tools.continue(
      problems.map(([a, b]) => Int32Array.from(this.encode(this.prompt(a, b)))),
      this.answerLength,
    );
    return problems.map(([a, b], index) => {
      const written = this.decode(outputs[index]!);
      return this.describe(a, b, written, written === this.answer(a, b));
    });
  }

  private describe(a: number, b: number, written: string, right: boolean): string {
    const value = /^[0-9]+$/.test(written)
      ? String(Number.parseInt([...written].reverse().join(''), 10))
      : '?';
    return `${this.prompt(a, b)}${written}   ${a} + ${b} = ${value} ${right ? '✓' : `✗ (${a + b})`}`;
  }
}
