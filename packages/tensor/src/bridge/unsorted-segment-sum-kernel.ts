import * as tf from '@tensorflow/tfjs-core';

/**
 * UnsortedSegmentSum for the wasm backend, which tfjs 4.22 lacks. It is the gradient of `gather`
 * (every embedding lookup), so without it no embedding trains on wasm.
 *
 * out[segmentIds[i], ...] += x[i, ...]; ids outside [0, numSegments) are dropped (TensorFlow's
 * semantics). Runs in JavaScript over the wasm heap: the rows are contiguous, so it is one pass.
 */
interface WasmBackendLike {
  readSync(dataId: unknown): ArrayLike<number>;
  makeOutput(
    shape: number[],
    dtype: tf.DataType,
    memoryOffset?: number,
    values?: tf.TypedArray,
  ): tf.TensorInfo;
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
  const values = backend.readSync(x.dataId);
  const ids = backend.readSync(segmentIds.dataId);
  const idCount = segmentIds.shape.reduce((product, size) => product * size, 1);
  const rowShape = x.shape.slice(segmentIds.shape.length);
  const rowSize = rowShape.reduce((product, size) => product * size, 1);
  const output =
    x.dtype === 'int32' ? new Int32Array(numSegments * rowSize) : new Float32Array(numSegments * rowSize);
  for (let index = 0; index < idCount; index++) {
    const segment = ids[index]!;
    if (segment < 0 || segment >= numSegments) continue;
    const source = index * rowSize;
    const target = segment * rowSize;
    for (let offset = 0; offset < rowSize; offset++) output[target + offset]! += values[source + offset]!;
  }
  return backend.makeOutput([numSegments, ...rowShape], x.dtype, undefined, output);
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
