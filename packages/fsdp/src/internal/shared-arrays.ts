/** Typed arrays over SharedArrayBuffers (what collectives read and write without staging). */
export function sharedUint16(length: number): Uint16Array {
  return new Uint16Array(new SharedArrayBuffer(Math.max(2, length * 2)), 0, length);
}

export function sharedFloat32(length: number): Float32Array {
  return new Float32Array(new SharedArrayBuffer(Math.max(4, length * 4)), 0, length);
}
