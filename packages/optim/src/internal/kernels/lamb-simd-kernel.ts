import { instantiate as instantiateModule } from '@fsdp-ts/kernels';
import { LAMB_SIMD_CHUNK, LAMB_SIMD_OFFSETS, lambSimdModuleBytes } from '../wasm/lamb-simd-module';
import { scratchShift } from './adam-simd-kernel';
import type { LambCoefficients } from './lamb-kernel';

type MomentsEntry = (
  byteEnd: number,
  beta1: number,
  beta3: number,
  beta2: number,
  oneMinusBeta2: number,
  inverseCorrection1: number,
  inverseCorrection2Sqrt: number,
  eps: number,
  weightDecay: number,
  byteStart: number,
) => void;
type ApplyEntry = (
  byteEnd: number,
  scale: number,
  inverseCorrection1: number,
  inverseCorrection2Sqrt: number,
  eps: number,
  weightDecay: number,
  byteStart: number,
) => void;

interface SimdLamb {
  heap: Float32Array; // the module's whole memory, which never grows
  results: Float64Array; // Σp² (two lanes), Σu² (two lanes) of the last lambMoments call
  moments: MomentsEntry;
  apply: ApplyEntry;
}

let simdLamb: SimdLamb | null | undefined;

/** The SIMD module, compiled once; null where WebAssembly SIMD is unavailable. */
function instance(): SimdLamb | null {
  if (simdLamb !== undefined) return simdLamb;
  const exports = instantiateModule(lambSimdModuleBytes()) as {
    memory: { buffer: ArrayBuffer };
    lambMoments: MomentsEntry;
    lambApply: ApplyEntry;
  } | null;
  simdLamb =
    exports === null
      ? null
      : {
          heap: new Float32Array(exports.memory.buffer),
          results: new Float64Array(exports.memory.buffer, LAMB_SIMD_OFFSETS.results, 4),
          moments: exports.lambMoments,
          apply: exports.lambApply,
        };
  return simdLamb;
}

/** True when the SIMD LAMB kernels can run here (Node 20 has WebAssembly SIMD). */
export function lambSimdAvailable(): boolean {
  return instance() !== null;
}

/** Scratch positions (floats) of one call, at the shift away from its arrays' page offsets. */
function scratchBases(shift: number): { param: number; grad: number; expAvg: number; expAvgSq: number } {
  const o = LAMB_SIMD_OFFSETS;
  return {
    param: (o.param + shift) / 4,
    grad: (o.grad + shift) / 4,
    expAvg: (o.expAvg + shift) / 4,
    expAvgSq: (o.expAvgSq + shift) / 4,
  };
}

/** Visits [start, start + count) chunk by chunk; `padded` is count rounded up to whole vectors. */
function forEachChunk(length: number, visit: (start: number, count: number, padded: number) => void): void {
  for (let start = 0; start < length; start += LAMB_SIMD_CHUNK) {
    const count = Math.min(LAMB_SIMD_CHUNK, length - start);
    visit(start, count, (count + 3) & ~3);
  }
}

/**
 * Fills a chunk's lanes past `count` so that their u is exactly 0 whatever eps (even 0): p, g and
 * m zero, v one (u = 0 / (√β2·ic2 + eps) + wd·0). They then add nothing to either norm.
 */
function padTail(
  heap: Float32Array,
  base: ReturnType<typeof scratchBases>,
  count: number,
  padded: number,
): void {
  heap.fill(0, base.param + count, base.param + padded);
  heap.fill(0, base.grad + count, base.grad + padded);
  heap.fill(0, base.expAvg + count, base.expAvg + padded);
  heap.fill(1, base.expAvgSq + count, base.expAvgSq + padded);
}

/**
 * `lambMomentsKernel` computed by WebAssembly SIMD in float32 (the norms' sums in float64): each
 * chunk of LAMB_SIMD_CHUNK elements is copied into cache-resident scratch at the shift of
 * [Note: scratch off the arrays' page offsets], updated, and m and v copied back. A chunk's tail
 * is padded to a whole vector (see padTail: the padding adds nothing to either norm), so every element goes
 * through the same operations wherever it sits ([Note: identical arithmetic for every element]).
 */
export function lambMomentsSimdKernel(
  data: Float32Array,
  grad: Float32Array,
  expAvg: Float32Array,
  expAvgSq: Float32Array,
  coefficients: LambCoefficients,
  norms: Float32Array,
  slot: number,
): void {
  const simd = instance();
  if (simd === null) throw new Error('lambMomentsSimdKernel: WebAssembly SIMD is unavailable');
  const { beta1, beta2, beta3, eps, weightDecay } = coefficients;
  const inverseCorrection1 = 1 / coefficients.biasCorrection1;
  const inverseCorrection2Sqrt = 1 / Math.sqrt(coefficients.biasCorrection2);
  const { heap, results } = simd;
  const shift = scratchShift([data, grad, expAvg, expAvgSq]);
  const base = scratchBases(shift);
  let weightSquares = 0;
  let updateSquares = 0;
  forEachChunk(data.length, (start, count, padded) => {
    const end = start + count;
    heap.set(data.subarray(start, end), base.param);
    heap.set(grad.subarray(start, end), base.grad);
    heap.set(expAvg.subarray(start, end), base.expAvg);
    heap.set(expAvgSq.subarray(start, end), base.expAvgSq);
    if (padded !== count) padTail(heap, base, count, padded);
    simd.moments(
      shift + padded * 4,
      beta1,
      beta3,
      beta2,
      1 - beta2,
      inverseCorrection1,
      inverseCorrection2Sqrt,
      eps,
      weightDecay,
      shift,
    );
    weightSquares += results[0]! + results[1]!;
    updateSquares += results[2]! + results[3]!;
    expAvg.set(heap.subarray(base.expAvg, base.expAvg + count), start);
    expAvgSq.set(heap.subarray(base.expAvgSq, base.expAvgSq + count), start);
  });
  norms[slot] = weightSquares;
  norms[slot + 1] = updateSquares;
}

/** `lambApplyKernel` by WebAssembly SIMD: p = p − scale·u, u recomputed as the moments kernel did. */
export function lambApplySimdKernel(
  data: Float32Array,
  expAvg: Float32Array,
  expAvgSq: Float32Array,
  coefficients: LambCoefficients,
  scale: number,
): void {
  const simd = instance();
  if (simd === null) throw new Error('lambApplySimdKernel: WebAssembly SIMD is unavailable');
  const { eps, weightDecay } = coefficients;
  const inverseCorrection1 = 1 / coefficients.biasCorrection1;
  const inverseCorrection2Sqrt = 1 / Math.sqrt(coefficients.biasCorrection2);
  const { heap } = simd;
  const shift = scratchShift([data, expAvg, expAvgSq]);
  const base = scratchBases(shift);
  forEachChunk(data.length, (start, count, padded) => {
    const end = start + count;
    heap.set(data.subarray(start, end), base.param);
    heap.set(expAvg.subarray(start, end), base.expAvg);
    heap.set(expAvgSq.subarray(start, end), base.expAvgSq);
    if (padded !== count) padTail(heap, base, count, padded);
    simd.apply(
      shift + padded * 4,
      scale,
      inverseCorrection1,
      inverseCorrection2Sqrt,
      eps,
      weightDecay,
      shift,
    );
    data.set(heap.subarray(base.param, base.param + count), start);
  });
}
