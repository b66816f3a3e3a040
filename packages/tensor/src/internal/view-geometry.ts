import { formatShape, TensorError } from '../errors';
import { contiguousStrides, type Shape, shapeNumel } from '../shape';
import type { Storage } from '../storage';

/** What the element arithmetic needs from a view. */
export interface ViewGeometry {
  readonly storage: Storage;
  readonly offset: number;
  readonly shape: Shape;
  readonly strides: readonly number[];
  readonly numel: number;
  readonly rank: number;
}

/** Storage offsets of every element of a view, in row-major order. */
export function elementOffsets(view: ViewGeometry): Int32Array | Float64Array {
  const offsets = view.storage.numel < 2 ** 31 ? new Int32Array(view.numel) : new Float64Array(view.numel);
  if (view.numel === 0) return offsets;
  const rank = view.rank;
  if (rank === 0) {
    offsets[0] = view.offset;
    return offsets;
  }
  const counter = new Array<number>(rank).fill(0);
  const innerSize = view.shape[rank - 1]!;
  const innerStride = view.strides[rank - 1]!;
  let base = view.offset;
  let written = 0;
  while (written < offsets.length) {
    for (let inner = 0; inner < innerSize; inner++) offsets[written++] = base + inner * innerStride;
    let dim = rank - 2;
    while (dim >= 0) {
      counter[dim]! += 1;
      base += view.strides[dim]!;
      if (counter[dim]! < view.shape[dim]!) break;
      base -= counter[dim]! * view.strides[dim]!;
      counter[dim] = 0;
      dim -= 1;
    }
    if (dim < 0) break;
  }
  return offsets;
}

export function checkBounds(
  storage: Storage,
  offset: number,
  shape: Shape,
  strides: readonly number[],
): void {
  const numel = shapeNumel(shape);
  let low = offset;
  let high = offset;
  if (numel > 0) {
    for (let dim = 0; dim < shape.length; dim++) {
      const reach = (shape[dim]! - 1) * strides[dim]!;
      if (reach < 0) low += reach;
      else high += reach;
    }
  }
  const valid =
    Number.isSafeInteger(offset) &&
    offset >= 0 &&
    (numel === 0 ? offset <= storage.numel : low >= 0 && high < storage.numel);
  if (!valid) {
    throw new TensorError(
      `View of shape ${formatShape(shape)} with strides ${formatShape(strides)} at offset ${offset} reaches elements [${low}, ${high}] of a storage of ${storage.numel} elements.`,
      {
        code: 'view-out-of-bounds',
        expected: `every element inside [0, ${storage.numel})`,
        actual: { offset, shape, strides, low, high },
        fix: 'check the offset, shape and strides against the storage size.',
      },
    );
  }
}

export function resolveShape(shape: Shape, numel: number, from: Shape): number[] {
  const inferred = shape.filter((size) => size === -1).length;
  const known = shapeNumel(shape.filter((size) => size !== -1));
  const resolved = shape.map((size) => (size === -1 && known > 0 ? numel / known : size));
  const ok =
    inferred <= 1 &&
    resolved.every((size) => Number.isSafeInteger(size) && size >= 0) &&
    shapeNumel(resolved) === numel;
  if (!ok) {
    throw new TensorError(
      `Cannot view shape ${formatShape(from)} (${numel} elements) as ${formatShape(shape)}.`,
      {
        code: 'shape-mismatch',
        expected: `a shape of ${numel} elements (at most one -1)`,
        actual: shape,
        fix: 'pick a shape whose sizes multiply to the element count.',
      },
    );
  }
  return resolved;
}

/**
 * Strides that let `newShape` address the same elements as (shape, strides) without a copy, or
 * null when none exist. Walks runs of old dims that are contiguous among themselves and splits or
 * merges only within a run (the rule PyTorch's `view` follows).
 */
export function stridesForView(shape: Shape, strides: readonly number[], newShape: Shape): number[] | null {
  const result = new Array<number>(newShape.length).fill(1);
  if (shapeNumel(shape) === 0 || shape.length === 0) return contiguousStrides(newShape);
  let viewDim = newShape.length - 1;
  let chunkBaseStride = strides[strides.length - 1]!;
  let tensorNumel = 1;
  let viewNumel = 1;
  for (let dim = shape.length - 1; dim >= 0; dim--) {
    tensorNumel *= shape[dim]!;
    const runEnds = dim === 0 || (shape[dim - 1] !== 1 && strides[dim - 1] !== tensorNumel * chunkBaseStride);
    if (!runEnds) continue;
    while (viewDim >= 0 && (viewNumel < tensorNumel || newShape[viewDim] === 1)) {
      result[viewDim] = viewNumel * chunkBaseStride;
      viewNumel *= newShape[viewDim]!;
      viewDim--;
    }
    if (viewNumel !== tensorNumel) return null;
    if (dim > 0) {
      chunkBaseStride = strides[dim - 1]!;
      tensorNumel = 1;
      viewNumel = 1;
    }
  }
  return viewDim === -1 ? result : null;
}
