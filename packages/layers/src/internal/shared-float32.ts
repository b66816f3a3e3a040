/** A Float32Array over a SharedArrayBuffer: collectives read and write it without staging copies. */
export function sharedFloat32(length: number): Float32Array {
  return new Float32Array(
    new SharedArrayBuffer(Math.max(length, 1) * Float32Array.BYTES_PER_ELEMENT),
  ).subarray(0, length);
}
