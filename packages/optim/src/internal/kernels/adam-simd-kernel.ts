import { instantiate as instantiateModule } from '@fsdp-ts/kernels';
import {
  ADAM_SIMD_CHUNK,
  ADAM_SIMD_MAXIMUM_SHIFT,
  ADAM_SIMD_OFFSETS,
  adamSimdModuleBytes,
} from '../wasm/adam-simd-module';
import type { AdamCoefficients } from './adam-kernel';

type SimdEntry = (
  byteEnd: number,
  stepSize: number,
  inverseCorrection2Sqrt: number,
  eps: number,
  beta1: number,
  oneMinusBeta1: number,
  beta2: number,
  oneMinusBeta2: number,
  decay: number,
  l2: number,
  sign: number,
  byteStart: number,
) => void;

interface SimdAdam {
  heap: Float32Array; // the module's whole memory, which never grows
  adam: SimdEntry;
  adamAmsgrad: SimdEntry;
}

let simdAdam: SimdAdam | null | undefined;

/** The SIMD module, compiled once; null where WebAssembly SIMD is unavailable. */
function instance(): SimdAdam | null {
  if (simdAdam !== undefined) return simdAdam;
  const exports = instantiateModule(adamSimdModuleBytes()) as {
    memory: { buffer: ArrayBuffer };
    adam: SimdEntry;
    adamAmsgrad: SimdEntry;
  } | null;
  simdAdam =
    exports === null
      ? null
      : {
          heap: new Float32Array(exports.memory.buffer),
          adam: exports.adam,
          adamAmsgrad: exports.adamAmsgrad,
        };
  return simdAdam;
}

/** True when the SIMD Adam kernel can run here (Node 20 has WebAssembly SIMD). */
export function adamSimdAvailable(): boolean {
  return instance() !== null;
}

/**
 * [Note: scratch off the arrays' page offsets]
 * Copying a 16 KiB chunk between a scratch array that sits in cache and a caller's array whose
 * address has the same offset within a 4 KiB page (to within 16 bytes) runs 8-10x slower on this
 * project's machines (AMD EPYC, glibc memmove; measured in Node 20, 2026-12-01: writing 1.6 M
 * floats back from a hot 16 KiB block took 2.3 ns per float aligned, 0.18 with the block moved by
 * 64 bytes). The loads wait on the stores before them whose addresses match in their low 12 bits
 * (4K aliasing). Large typed arrays start on a page, and whole-chunk steps keep the offset, so a
 * flat shard stepped whole hit it on every chunk: one AdamW step over the reference GPT's W=2
 * shard took 11-17 ms as one Parameter against 5-8 ms as 52 views at scattered offsets.
 * So every scratch array has ADAM_SIMD_MAXIMUM_SHIFT bytes of room before its chunk, and each call
 * places the chunks at the shift (a multiple of 64 bytes) farthest from the page offsets of the
 * arrays it copies (assuming their buffers start on a page, as V8's large ones do).
 */
export function scratchShift(arrays: readonly (Float32Array | null)[]): number {
  let best = 0;
  let bestDistance = -1;
  for (let shift = 0; shift < ADAM_SIMD_MAXIMUM_SHIFT; shift += 512) {
    let distance = ADAM_SIMD_MAXIMUM_SHIFT;
    for (const array of arrays) {
      if (array === null) continue;
      const apart = Math.abs(shift - (array.byteOffset % ADAM_SIMD_MAXIMUM_SHIFT));
      distance = Math.min(distance, apart, ADAM_SIMD_MAXIMUM_SHIFT - apart);
    }
    if (distance > bestDistance) {
      best = shift;
      bestDistance = distance;
    }
  }
  return best;
}

/**
 * The Adam/AdamW update of `adamKernel`, computed in float32 four lanes at a time by WebAssembly
 * SIMD. The arrays live outside the module's memory, so each chunk of 4096 elements is copied into
 * cache-resident scratch, updated, and copied back (memcpy speed; main-memory traffic stays one
 * read of each array and one write of each updated one).
 *
 * [Note: identical arithmetic for every element]
 * A chunk's tail is zero-padded to a whole SIMD vector rather than finished by a scalar loop, so
 * every element goes through the same float32 operations whatever its position: splitting a
 * parameter into shards at any offsets gives bit-identical results to stepping it whole.
 */
export function adamSimdKernel(
  data: Float32Array,
  grad: Float32Array,
  expAvg: Float32Array,
  expAvgSq: Float32Array,
  maxExpAvgSq: Float32Array | null,
  coefficients: AdamCoefficients,
): void {
  const simd = instance();
  if (simd === null) throw new Error('adamSimdKernel: WebAssembly SIMD is unavailable');
  const { lr, beta1, beta2, eps, weightDecay, step } = coefficients;
  const decoupled = coefficients.decoupledWeightDecay;
  const entry = maxExpAvgSq === null ? simd.adam : simd.adamAmsgrad;
  const { heap } = simd;
  const shift = scratchShift([data, grad, expAvg, expAvgSq, maxExpAvgSq]);
  const base = {
    param: (ADAM_SIMD_OFFSETS.param + shift) / 4,
    grad: (ADAM_SIMD_OFFSETS.grad + shift) / 4,
    expAvg: (ADAM_SIMD_OFFSETS.expAvg + shift) / 4,
    expAvgSq: (ADAM_SIMD_OFFSETS.expAvgSq + shift) / 4,
    maxExpAvgSq: (ADAM_SIMD_OFFSETS.maxExpAvgSq + shift) / 4,
  };
  const stepSize = lr / (1 - beta1 ** step);
  const inverseCorrection2Sqrt = 1 / Math.sqrt(1 - beta2 ** step);
  const decay = decoupled ? 1 - lr * weightDecay : 1;
  const l2 = decoupled ? 0 : weightDecay;
  const sign = coefficients.maximize ? -1 : 1;
  const length = data.length;
  for (let start = 0; start < length; start += ADAM_SIMD_CHUNK) {
    const count = Math.min(ADAM_SIMD_CHUNK, length - start);
    const padded = (count + 3) & ~3;
    const end = start + count;
    heap.set(data.subarray(start, end), base.param);
    heap.set(grad.subarray(start, end), base.grad);
    heap.set(expAvg.subarray(start, end), base.expAvg);
    heap.set(expAvgSq.subarray(start, end), base.expAvgSq);
    if (maxExpAvgSq !== null) heap.set(maxExpAvgSq.subarray(start, end), base.maxExpAvgSq);
    if (padded !== count) {
      for (const offset of Object.values(base)) heap.fill(0, offset + count, offset + padded);
    }
    entry(
      shift + padded * 4,
      stepSize,
      inverseCorrection2Sqrt,
      eps,
      beta1,
      1 - beta1,
      beta2,
      1 - beta2,
      decay,
      l2,
      sign,
      shift,
    );
    data.set(heap.subarray(base.param, base.param + count), start);
    expAvg.set(heap.subarray(base.expAvg, base.expAvg + count), start);
    expAvgSq.set(heap.subarray(base.expAvgSq, base.expAvgSq + count), start);
    if (maxExpAvgSq !== null)
      maxExpAvgSq.set(heap.subarray(base.maxExpAvgSq, base.maxExpAvgSq + count), start);
  }
}
