import { formatShape, TensorError } from './errors';

/** A tensor's shape: one size per dimension. */
export type Shape = readonly number[];

/** Number of elements of a shape (1 for a scalar `[]`). */
export function shapeNumel(shape: Shape): number {
  let numel = 1;
  for (const size of shape) numel *= size;
  return numel;
}

/** Row-major (C-order) strides of a shape, in elements. */
export function contiguousStrides(shape: Shape): number[] {
  const strides = new Array<number>(shape.length);
  let stride = 1;
  for (let dim = shape.length - 1; dim >= 0; dim--) {
    strides[dim] = stride;
    stride *= shape[dim]!;
  }
  return strides;
}

/** True when both shapes have the same sizes. */
export function shapesEqual(first: Shape, second: Shape): boolean {
  return first.length === second.length && first.every((size, dim) => size === second[dim]);
}

export function checkShape(shape: Shape, what: string): void {
  for (const size of shape) {
    if (!Number.isSafeInteger(size) || size < 0) {
      throw new TensorError(`${what}: invalid shape ${formatShape(shape)}.`, {
        code: 'invalid-argument',
        expected: 'non-negative integer sizes',
        actual: shape,
        fix: 'pass a shape of non-negative integers, e.g. [4, 8].',
      });
    }
  }
}
