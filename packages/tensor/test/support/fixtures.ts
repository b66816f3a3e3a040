// What this package's tests repeat: the tfjs backends the bridge runs on, and the check that a
// test leaves no tfjs tensor behind.
import type { BackendName } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { expect } from 'vitest';

/** The backends the bridge supports without native add-ons; tests that touch tfjs run on each. */
export const tfjsBackends: readonly BackendName[] = ['cpu', 'wasm'];

/**
 * Counts tfjs tensors now: `added()` is how many more are alive since, and `expectNoneLeft()`
 * fails when any are (a leak).
 */
export function trackTensors(): { added(): number; expectNoneLeft(): void } {
  const before = tf.memory().numTensors;
  const added = () => tf.memory().numTensors - before;
  return { added, expectNoneLeft: () => expect(added()).toBe(0) };
}
