/**
 * Probes the collectives bench runs on its own thread before the sweeps, each a peer for rows
 * measured in the same run: single-core memcpy, bfloat16 conversion, and the conversion work of
 * a bfloat16-wire all-gather and reduce-scatter against float32's.
 */

import {
  addRoundBfloat16,
  decodeBfloat16,
  encodeBfloat16,
  encodeRoundBfloat16,
  REDUCE_BLOCK,
  reduceKernels,
} from '@fsdp-ts/kernels';
import { median } from './internal/median.js';

export function stats(values: number[]): { median: number; best: number; worst: number } {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    median: median(sorted),
    best: sorted[sorted.length - 1]!,
    worst: sorted[0]!,
  };
}

export function memcpy(): { median: number; best: number; worst: number } {
  const source = new Uint8Array(64 * (1 << 20)).fill(3);
  const target = new Uint8Array(64 * (1 << 20));
  const rates: number[] = [];
  for (let iteration = 0; iteration < 13; iteration++) {
    const start = performance.now();
    target.set(source);
    const ms = performance.now() - start;
    if (iteration >= 3) rates.push(source.length / (ms / 1000) / 1e9);
  }
  return stats(rates);
}

/** bfloat16 encode and decode of 4 Mi elements on this thread, G elements/s. */
export function conversion(): { encode: ReturnType<typeof stats>; decode: ReturnType<typeof stats> } {
  const elements = 4 << 20;
  const floats = new Float32Array(elements).map((_, index) => (index % 13) - 6 + index * 1e-7);
  const halves = new Uint16Array(elements);
  const encode: number[] = [];
  const decode: number[] = [];
  for (let iteration = 0; iteration < 13; iteration++) {
    let start = performance.now();
    encodeBfloat16(floats, halves);
    const encodeMs = performance.now() - start;
    start = performance.now();
    decodeBfloat16(halves, floats);
    const decodeMs = performance.now() - start;
    if (iteration >= 3) {
      encode.push(elements / encodeMs / 1e6);
      decode.push(elements / decodeMs / 1e6);
    }
  }
  return { encode: stats(encode), decode: stats(decode) };
}

/**
 * The conversion work of a W=2, 16 MiB bfloat16-wire all-gather and reduce-scatter on one rank
 * (2 Mi elements, SharedArrayBuffer arrays as the ops use), median ms over 9 runs: all-gather
 * encodes and rounds its input into the bytes it sends and its own block (float32: a copy) and
 * decodes what it receives; reduce-scatter encodes what it sends and adds, rounds and encodes what it receives
 * (float32: an add).
 */
export function bfloat16WirePhases(): Record<
  'allGather' | 'reduceScatter',
  { text: string; extraMs: number }
> {
  const elements = 2 << 20;
  const floats = new Float32Array(new SharedArrayBuffer(elements * 4)).map((_, index) => (index % 13) - 6);
  const other = new Float32Array(new SharedArrayBuffer(elements * 4)).fill(1.5);
  const halves = new Uint16Array(new SharedArrayBuffer(elements * 2));
  const encodedSums = new Uint16Array(new SharedArrayBuffer(elements * 2));
  const time = (run: () => void): number => {
    const times: number[] = [];
    for (let iteration = 0; iteration < 11; iteration++) {
      const start = performance.now();
      run();
      if (iteration >= 2) times.push(performance.now() - start);
    }
    return median(times.sort((a, b) => a - b));
  };
  const encode = time(() => encodeBfloat16(floats, halves));
  const decode = time(() => decodeBfloat16(halves, other));
  const copy = time(() => other.set(floats));
  const encodeRound = time(() => encodeRoundBfloat16(floats, other, halves));
  const addRound = time(() => addRoundBfloat16(floats, halves, other, encodedSums));
  const kernels = reduceKernels();
  const add = time(() => {
    // As the float32 reduce step does: own values into the accumulator, add, copy out.
    if (kernels === null) {
      for (let index = 0; index < elements; index++) other[index] = floats[index]! + other[index]!;
      return;
    }
    for (let start = 0; start < elements; start += REDUCE_BLOCK) {
      const count = Math.min(REDUCE_BLOCK, elements - start);
      kernels.accumulatorFloats.set(floats.subarray(start, start + count));
      kernels.reduce.sumFloat(count);
      other.set(kernels.accumulatorFloats.subarray(0, count), start);
    }
  });
  return {
    allGather: {
      text: `encode and round own ${encodeRound.toFixed(2)} ms + decode received ${decode.toFixed(2)} - float32's own-block copy ${copy.toFixed(2)}`,
      extraMs: encodeRound + decode - copy,
    },
    reduceScatter: {
      text: `encode ${encode.toFixed(2)} ms + add-round-encode ${addRound.toFixed(2)} - float32's add ${add.toFixed(2)}`,
      extraMs: encode + addRound - add,
    },
  };
}
