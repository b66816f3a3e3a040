/** Sizes of one attention call: qkv is [batch, time, 3·dModel], dModel = heads · headSize. */
export interface AttentionShape {
  batch: number;
  time: number;
  dModel: number;
  heads: number;
  headSize: number;
}

/**
 * Copies one head of one part (0 q, 1 k, 2 v) of batch row `b` out of a [batch, time, rowWidth]
 * array (rowWidth = 3·dModel for qkv, dModel for an output gradient, where part must be 0) into a
 * new [time, headSize] array, or [headSize, time] when `transpose`, multiplied by `scale`.
 */
export function gatherHead(
  source: Float32Array,
  shape: AttentionShape,
  b: number,
  head: number,
  part: number,
  scale: number,
  transpose: boolean,
  rowWidth = 3 * shape.dModel,
): Float32Array {
  const { time, headSize, dModel } = shape;
  const result = new Float32Array(time * headSize);
  const column = part * dModel + head * headSize;
  for (let t = 0; t < time; t++) {
    const offset = (b * time + t) * rowWidth + column;
    if (transpose) {
      for (let index = 0; index < headSize; index++)
        result[index * time + t] = source[offset + index]! * scale;
    } else {
      const base = t * headSize;
      for (let index = 0; index < headSize; index++) result[base + index] = source[offset + index]! * scale;
    }
  }
  return result;
}

/** Adds `scale` · a [time, headSize] head into part `part` of row `b` of a [batch, time, rowWidth] array. */
export function scatterHead(
  head: Float32Array,
  shape: AttentionShape,
  b: number,
  headIndex: number,
  part: number,
  scale: number,
  target: Float32Array,
  rowWidth: number,
): void {
  const { time, headSize, dModel } = shape;
  const column = part * dModel + headIndex * headSize;
  for (let t = 0; t < time; t++) {
    const offset = (b * time + t) * rowWidth + column;
    const base = t * headSize;
    for (let index = 0; index < headSize; index++) target[offset + index]! += head[base + index]! * scale;
  }
}

/** A new array holding the transpose of a size × size row-major matrix. */
export function transposeSquare(matrix: Float32Array, size: number): Float32Array {
  const result = new Float32Array(size * size);
  for (let row = 0; row < size; row++) {
    for (let column = 0; column < size; column++) result[column * size + row] = matrix[row * size + column]!;
  }
  return result;
}
