import {
  instantiate as instantiateModule,
  KERNEL_BLOCK_SCRATCH_ELEMENTS,
  type KernelBlock,
  kernelBlockOf,
  webAssembly,
} from '@fsdp-ts/kernels';
import {
  ADAM_SIMD_CHUNK,
  ADAM_SIMD_MAXIMUM_SHIFT,
  ADAM_SIMD_OFFSETS,
  adamSimdModuleBytes,
} from '../wasm/adam-simd-module';
import type { AdamCoefficients } from './adam-kernel';

type SimdEntry = (
  byteCount: number,
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
  param: number,
  grad: number,
  expAvg: number,
  expAvgSq: number,
  maxExpAvgSq: number,
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

interface BlockEntries {
  adam: SimdEntry;
  adamAmsgrad: SimdEntry;
}

let blockModule: object | null | undefined;
const blockEntries = new WeakMap<KernelBlock, BlockEntries>();

/** The module's block build instantiated over `block`'s memory (once per block); null if it cannot be. */
function entriesFor(block: KernelBlock): BlockEntries | null {
  const known = blockEntries.get(block);
  if (known !== undefined) return known;
  const api = webAssembly();
  if (api === undefined) return null;
  if (blockModule === undefined) {
    const bytes = adamSimdModuleBytes('block');
    blockModule = api.validate(bytes) ? new api.Module(bytes) : null;
  }
  if (blockModule === null) return null;
  let entries: BlockEntries;
  try {
    const exports = new api.Instance(blockModule, { env: { memory: block.memory } }).exports;
    entries = { adam: exports.adam as SimdEntry, adamAmsgrad: exports.adamAmsgrad as SimdEntry };
  } catch {
    return null;
  }
  blockEntries.set(block, entries);
  return entries;
}

/**
 * A new, zero-filled state buffer `name` in the slot beside `data` of the kernel block that holds
 * it, recorded in `buffers`; null when data is not a block's own array or the slot is taken (the
 * caller then makes an ordinary buffer). See [Note: Adam in a kernel block].
 */
export function stateBesideData(
  buffers: Map<string, Float32Array>,
  name: 'expAvg' | 'expAvgSq' | 'maxExpAvgSq',
  data: Float32Array,
  numel: number,
): Float32Array | null {
  const block = kernelBlockOf(data);
  if (block === null || data.byteOffset !== 0 || block.numel !== numel || data.length !== numel) return null;
  const slot = block.take(name);
  if (slot !== null) buffers.set(name, slot);
  return slot;
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
  }; // float32 indices of the scratch arrays' chunks
  const stepSize = lr / (1 - beta1 ** step);
  const inverseCorrection2Sqrt = 1 / Math.sqrt(1 - beta2 ** step);
  const decay = decoupled ? 1 - lr * weightDecay : 1;
  const l2 = decoupled ? 0 : weightDecay;
  const sign = coefficients.maximize ? -1 : 1;
  const scalars = [
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
  ] as const;
  const block = blockFor(data, grad, expAvg, expAvgSq, maxExpAvgSq);
  if (block !== null) {
    const blockEntry = entriesFor(block)!;
    const inBlock = maxExpAvgSq === null ? blockEntry.adam : blockEntry.adamAmsgrad;
    stepInBlock(block, inBlock, scalars, data, grad, expAvg, expAvgSq, maxExpAvgSq);
    return;
  }
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
      padded * 4,
      ...scalars,
      base.param * 4,
      base.grad * 4,
      base.expAvg * 4,
      base.expAvgSq * 4,
      base.maxExpAvgSq * 4,
    );
    data.set(heap.subarray(base.param, base.param + count), start);
    expAvg.set(heap.subarray(base.expAvg, base.expAvg + count), start);
    expAvgSq.set(heap.subarray(base.expAvgSq, base.expAvgSq + count), start);
    if (maxExpAvgSq !== null)
      maxExpAvgSq.set(heap.subarray(base.maxExpAvgSq, base.maxExpAvgSq + count), start);
  }
}

/**
 * [Note: Adam in a kernel block]
 * When data and the state arrays live in one kernel block ([Note: kernel blocks] in
 * @fsdp-ts/kernels; nn puts a Parameter's values there, backward its first grad, and Adam its
 * state), the module's block build steps them where they are: no chunk copies but the grad's
 * when it lives elsewhere (copied chunk by chunk into the block's scratch). The last 1-3
 * elements go through zero-padded vectors in the scratch, as the copying path's tails do, so
 * every element sees the same float32 operations ([Note: identical arithmetic for every
 * element]): both paths give the same bits. Arrays that overlap take the copying path.
 * `adamSimdPath` says which path the kernel takes for some arrays.
 */
export function adamSimdPath(
  data: Float32Array,
  grad: Float32Array,
  expAvg: Float32Array,
  expAvgSq: Float32Array,
  maxExpAvgSq: Float32Array | null,
): 'in block' | 'grad copied into block' | 'chunks copied' {
  const block = blockFor(data, grad, expAvg, expAvgSq, maxExpAvgSq);
  if (block === null) return 'chunks copied';
  return block.holds(grad) ? 'in block' : 'grad copied into block';
}

/** The block the kernel steps these arrays in (see the note), or null for the copying path. */
function blockFor(
  data: Float32Array,
  grad: Float32Array,
  expAvg: Float32Array,
  expAvgSq: Float32Array,
  maxExpAvgSq: Float32Array | null,
): KernelBlock | null {
  const block = kernelBlockOf(data);
  if (block === null || !inPlace(block, data, grad, expAvg, expAvgSq, maxExpAvgSq)) return null;
  return entriesFor(block) === null ? null : block;
}

function inPlace(
  block: KernelBlock,
  data: Float32Array,
  grad: Float32Array,
  expAvg: Float32Array,
  expAvgSq: Float32Array,
  maxExpAvgSq: Float32Array | null,
): boolean {
  const arrays = [data, expAvg, expAvgSq, ...(maxExpAvgSq === null ? [] : [maxExpAvgSq])];
  if (!arrays.every((array) => block.holds(array))) return false;
  if (block.holds(grad)) arrays.push(grad);
  for (let first = 0; first < arrays.length; first++) {
    for (let second = first + 1; second < arrays.length; second++) {
      const [a, b] = [arrays[first]!, arrays[second]!];
      if (a.byteOffset < b.byteOffset + b.byteLength && b.byteOffset < a.byteOffset + a.byteLength)
        return false;
    }
  }
  return true;
}

type Scalars = readonly [number, number, number, number, number, number, number, number, number, number];

function stepInBlock(
  block: KernelBlock,
  entry: SimdEntry,
  scalars: Scalars,
  data: Float32Array,
  grad: Float32Array,
  expAvg: Float32Array,
  expAvgSq: Float32Array,
  maxExpAvgSq: Float32Array | null,
): void {
  const length = data.length;
  const whole = length & ~3;
  const scratch = block.scratch;
  const vmax = maxExpAvgSq?.byteOffset ?? 0;
  if (block.holds(grad)) {
    entry(
      whole * 4,
      ...scalars,
      data.byteOffset,
      grad.byteOffset,
      expAvg.byteOffset,
      expAvgSq.byteOffset,
      vmax,
    );
  } else {
    const chunk = ADAM_SIMD_CHUNK;
    for (let start = 0; start < whole; start += chunk) {
      const count = Math.min(chunk, whole - start);
      scratch.set(grad.subarray(start, start + count), 0);
      const offset = start * 4;
      entry(
        count * 4,
        ...scalars,
        data.byteOffset + offset,
        scratch.byteOffset,
        expAvg.byteOffset + offset,
        expAvgSq.byteOffset + offset,
        maxExpAvgSq === null ? 0 : vmax + offset,
      );
    }
  }
  if (whole === length) return;
  // The tail: five zero-padded vectors after the scratch's chunk region.
  const tail = [data, grad, expAvg, expAvgSq, maxExpAvgSq];
  const vectorAt = (index: number) => ADAM_SIMD_CHUNK + 4 * index;
  tail.forEach((array, index) => {
    scratch.fill(0, vectorAt(index), vectorAt(index) + 4);
    if (array !== null) scratch.set(array.subarray(whole), vectorAt(index));
  });
  const address = (index: number) => scratch.byteOffset + vectorAt(index) * 4;
  entry(16, ...scalars, address(0), address(1), address(2), address(3), address(4));
  tail.forEach((array, index) => {
    if (array === null || index === 1) return;
    array.set(scratch.subarray(vectorAt(index), vectorAt(index) + length - whole), whole);
  });
}

// The tail vectors must fit in the block's scratch.
if (ADAM_SIMD_CHUNK + 20 > KERNEL_BLOCK_SCRATCH_ELEMENTS)
  throw new Error('adam: kernel block scratch too small');
