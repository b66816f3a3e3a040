import * as tf from '@tensorflow/tfjs-core';
import { backingVariable, swapVariableValue } from './layer-access';
import { tap } from './tap';
import type { WeightBucket } from './weight-bucket';

/**
 * [Note: reductions overlapped with backward]
 * Under 'replicate', 'shard-optimizer' and 'shard-gradients' a step's gradients used to be read
 * from tf.variableGrads after the whole backward, and only then were the buckets all-reduced (or
 * reduce-scattered): the communication waited for the backward and the backward for nothing.
 * Now each trainable weight is read through a tap during the step's forward (as under full-shard,
 * see [Note: full-shard layers]): its gradient arrives while the backward runs, summed over its
 * uses, and is added into its bucket's full gradient. Buckets are issued in reverse bucket order
 * (the order backward reaches them in a sequential model): bucket k's reduction starts as soon as
 * its own gradients and those of every later bucket have arrived, so it overlaps the backward of
 * the layers before it. After the backward every bucket not issued yet is issued in the same
 * order (a weight off the loss's path has no gradient: zeros), and then the loss is all-reduced.
 * So every rank issues the same collectives in the same order whatever the timing, including a
 * rank with no samples in a batch, which issues every bucket (zeros) in that order.
 */
export class OverlappedReduction {
  /** Differentiated instead of the weights (the taps' second input). */
  readonly anchor: tf.Variable;
  readonly #buckets: readonly WeightBucket[];
  #arrived: number[] = [];
  /** The bucket whose reduction is issued next; -1 when all were issued this step. */
  #next = -1;
  /**
   * Buckets issued from a tap while the backward ran, and by issueRemaining, over every step so
   * far. Internal (not exported from the package): the parity test reads them to check that the
   * overlap actually happens.
   */
  issuedDuringBackward = 0;
  issuedAfterBackward = 0;

  constructor(buckets: readonly WeightBucket[]) {
    this.#buckets = buckets;
    // The initial value is a separate tensor sharing the variable's data: tidy frees it.
    this.anchor = tf.tidy(() => tf.variable(tf.scalar(0), true));
  }

  /** A step starts: zeroed full gradients, nothing arrived, nothing issued. */
  beginStep(): void {
    for (const bucket of this.#buckets) bucket.beginGradients();
    this.#arrived = this.#buckets.map(() => 0);
    this.#next = this.#buckets.length - 1;
  }

  /** Makes every trainable weight read a tap until the returned function is called. */
  tapVariables(): () => void {
    const restores = this.#buckets.flatMap((bucket, bucketIndex) =>
      bucket.variables.map((variable, index) =>
        swapVariableValue(
          variable,
          tap(backingVariable(variable), this.anchor, (gradient) =>
            this.#receive(bucketIndex, index, gradient),
          ),
        ),
      ),
    );
    return () => {
      for (const restore of restores.reverse()) restore();
    };
  }

  /** After the backward (or instead of it): issues every reduction not issued yet, in order. */
  issueRemaining(): void {
    while (this.#next >= 0) {
      this.#buckets[this.#next--]!.startReduction();
      this.issuedAfterBackward++;
    }
  }

  dispose(): void {
    this.anchor.dispose();
  }

  #receive(bucketIndex: number, index: number, gradient: tf.Tensor): void {
    const bucket = this.#buckets[bucketIndex]!;
    bucket.addGradient(index, gradient);
    this.#arrived[bucketIndex]! += 1;
    while (this.#next >= 0 && this.#arrived[this.#next] === this.#buckets[this.#next]!.variables.length) {
      this.#buckets[this.#next--]!.startReduction();
      this.issuedDuringBackward++;
    }
  }
}
