import * as tf from '@tensorflow/tfjs-core';

/**
 * UnsortedSegmentSum for the wasm backend, which tfjs 4.22 lacks. It is the gradient of `gather`
 * (every embedding lookup), so without it no embedding trains on wasm.
 *
 * out[segmentIds[i], ...] += x[i, ...]; ids outside [0, numSegments) are dropped (TensorFlow's
 * semantics). Runs in JavaScript over the wasm heap: the rows are contiguous, so it is one pass.
 * It reads x and the ids where they lie and sums straight into the output's heap memory: reading
 * them with `readSync` (a fresh copy each) and summing into a fresh array that `makeOutput` then
 * copied again made 2.5 MB of garbage ArrayBuffers a step for the reference GPT at 8 × 128 (see
 * [Note: saved second outputs] in nn for why fresh ArrayBuffers cost more than their copy).
 */
interface WasmBackendLike {
  makeOutput(shape: number[], dtype: tf.DataType): tf.TensorInfo;
  typedArrayFromHeap(info: tf.TensorInfo): tf.TypedArray;
}

function unsortedSegmentSum(args: {
  inputs: tf.NamedTensorInfoMap;
  backend: unknown;
  attrs?: tf.NamedAttrMap;
}): tf.TensorInfo {
  const backend = args.backend as WasmBackendLike;
  const x = args.inputs.x!;
  const segmentIds = args.inputs.segmentIds!;
  const numSegments = Number(args.attrs?.numSegments);
  const idCount = segmentIds.shape.reduce((product, size) => product * size, 1);
  const rowShape = x.shape.slice(segmentIds.shape.length);
  const rowSize = rowShape.reduce((product, size) => product * size, 1);
  const outputInfo = backend.makeOutput([numSegments, ...rowShape], x.dtype);
  // Views of the heap, taken after the last allocation (allocating may grow and detach it).
  const values = backend.typedArrayFromHeap(x);
  const ids = backend.typedArrayFromHeap(segmentIds);
  const output = backend.typedArrayFromHeap(outputInfo);
  output.fill(0);
  for (let index = 0; index < idCount; index++) {
    const segment = ids[index]!;
    if (segment < 0 || segment >= numSegments) continue;
    const source = index * rowSize;
    const target = segment * rowSize;
    for (let offset = 0; offset < rowSize; offset++) output[target + offset]! += values[source + offset]!;
  }
  return outputInfo;
}

/** Registers the kernel for `backendName` unless that backend already has one. */
export function registerUnsortedSegmentSum(backendName: string): void {
  if (tf.getKernel('UnsortedSegmentSum', backendName) !== undefined) return;
  tf.registerKernel({
    kernelName: 'UnsortedSegmentSum',
    backendName,
    kernelFunc: unsortedSegmentSum as unknown as tf.KernelFunc,
  });
}
