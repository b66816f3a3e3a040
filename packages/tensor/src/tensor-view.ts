import { codecFor } from './dtype/codec';
import { convertContiguous } from './dtype/convert';
import type { DType, TypedArray } from './dtype/dtype';
import { formatShape, TensorError } from './errors';
import { checkBounds, elementOffsets, resolveShape, stridesForView } from './internal/view-geometry';
import { checkShape, contiguousStrides, type Shape, shapeNumel, shapesEqual } from './shape';
import { Storage, type StorageOptions } from './storage';
import { zeroFill } from './zero-fill';

/**
 * (storage, element offset, shape, strides): a window onto a Storage. Views never own memory and
 * never copy unless a method says so. A view of a view points at the root storage (there is no
 * chain to walk).
 *
 * Invariant: every element the view can address lies inside [0, storage.numel), checked at
 * construction, so reads never go out of bounds even through a re-allocated storage.
 */
export class TensorView {
  readonly storage: Storage;
  readonly offset: number; // elements, not bytes
  readonly shape: Shape;
  readonly strides: readonly number[]; // elements, not bytes
  readonly numel: number;

  constructor(
    storage: Storage,
    offset: number,
    shape: Shape,
    strides: readonly number[] = contiguousStrides(shape),
  ) {
    checkShape(shape, 'TensorView');
    if (strides.length !== shape.length) {
      throw new TensorError(`TensorView: ${strides.length} strides for a shape of rank ${shape.length}.`, {
        code: 'invalid-argument',
        expected: shape.length,
        actual: strides.length,
        fix: 'pass one stride per dimension, or omit strides for a contiguous view.',
      });
    }
    this.storage = storage;
    this.offset = offset;
    this.shape = Object.freeze([...shape]);
    this.strides = Object.freeze([...strides]);
    this.numel = shapeNumel(shape);
    checkBounds(storage, offset, this.shape, this.strides);
  }

  /** A new zero-filled contiguous view over its own storage. */
  static zeros(shape: Shape, dtype: DType = 'float32', options: StorageOptions = {}): TensorView {
    checkShape(shape, 'TensorView.zeros');
    return new TensorView(Storage.allocate(dtype, shapeNumel(shape), options), 0, shape);
  }

  /** A new contiguous view holding `values` (converted to the dtype). */
  static fromArray(
    values: ArrayLike<number>,
    shape: Shape,
    dtype: DType = 'float32',
    options: StorageOptions = {},
  ) {
    const view = TensorView.zeros(shape, dtype, options);
    if (values.length !== view.numel) {
      throw new TensorError(
        `TensorView.fromArray: ${values.length} values for shape ${formatShape(shape)}.`,
        {
          code: 'shape-mismatch',
          expected: view.numel,
          actual: values.length,
          fix: 'pass exactly one value per element of the shape.',
        },
      );
    }
    const array = view.typedArray();
    const { encode } = codecFor(dtype);
    for (let index = 0; index < values.length; index++) array[index] = encode(values[index]!);
    return view;
  }

  /** The storage's dtype. */
  get dtype(): DType {
    return this.storage.dtype;
  }

  /** The number of dimensions. */
  get rank(): number {
    return this.shape.length;
  }

  /** True when the elements are laid out row-major without gaps (size-1 dims' strides ignored). */
  get isContiguous(): boolean {
    let expected = 1;
    for (let dim = this.shape.length - 1; dim >= 0; dim--) {
      const size = this.shape[dim]!;
      if (size === 0) return true;
      if (size !== 1 && this.strides[dim] !== expected) return false;
      expected *= size;
    }
    return true;
  }

  /** The view of `length` entries of dimension `dim` from `start`. No copy. */
  narrow(dim: number, start: number, length: number): TensorView {
    const size = this.shape[dim];
    if (
      size === undefined ||
      !Number.isInteger(start) ||
      !Number.isInteger(length) ||
      start < 0 ||
      length < 0 ||
      start + length > size
    ) {
      throw new TensorError(
        `narrow(${dim}, ${start}, ${length}) is out of range for shape ${formatShape(this.shape)}.`,
        {
          code: 'view-out-of-bounds',
          expected:
            size === undefined ? `a dim in [0, ${this.rank})` : `0 <= start and start + length <= ${size}`,
          actual: { dim, start, length },
          fix: 'check the dimension index and that the range lies inside that dimension.',
        },
      );
    }
    const shape = [...this.shape];
    shape[dim] = length;
    const offset = length === 0 ? this.offset : this.offset + start * this.strides[dim]!;
    return new TensorView(this.storage, offset, shape, this.strides);
  }

  /** The same elements under another shape (one size may be -1). Throws where no copy-free view exists. */
  view(shape: Shape): TensorView {
    const resolved = resolveShape(shape, this.numel, this.shape);
    if (this.isContiguous) return new TensorView(this.storage, this.offset, resolved);
    const strides = stridesForView(this.shape, this.strides, resolved);
    if (strides === null) {
      throw new TensorError(
        `view(${formatShape(shape)}) needs a copy: the strides ${formatShape(this.strides)} of shape ${formatShape(this.shape)} cannot be reshaped in place.`,
        {
          code: 'not-contiguous',
          expected: 'a contiguous view, or a shape that only splits or merges compatible dims',
          actual: { shape: this.shape, strides: this.strides },
          fix: 'call .contiguous().view(shape) to copy first.',
        },
      );
    }
    return new TensorView(this.storage, this.offset, resolved, strides);
  }

  /** A 1-D view of the same elements (`view([numel])`). */
  flatten(): TensorView {
    return this.view([this.numel]);
  }

  /** The view with dimensions reordered. No copy. */
  permute(order: readonly number[]): TensorView {
    const sorted = [...order].sort((first, second) => first - second);
    if (order.length !== this.rank || sorted.some((dim, index) => dim !== index)) {
      throw new TensorError(`permute(${formatShape(order)}) is not a permutation of the ${this.rank} dims.`, {
        code: 'invalid-argument',
        expected: `a permutation of 0..${this.rank - 1}`,
        actual: order,
        fix: 'list every dimension index exactly once.',
      });
    }
    return new TensorView(
      this.storage,
      this.offset,
      order.map((dim) => this.shape[dim]!),
      order.map((dim) => this.strides[dim]!),
    );
  }

  /** A view with dimensions `first` and `second` swapped, sharing the storage. */
  transpose(first: number, second: number): TensorView {
    const order = this.shape.map((_, dim) => dim);
    order[first] = second;
    order[second] = first;
    return this.permute(order);
  }

  /** This view if contiguous, else a contiguous copy in a new storage. */
  contiguous(options: StorageOptions = {}): TensorView {
    if (this.isContiguous) return this;
    const copy = TensorView.zeros(this.shape, this.dtype, options);
    copy.copyFrom(this);
    return copy;
  }

  /**
   * The elements as a typed array that aliases the storage (no copy). Contiguous views only.
   * bfloat16/float16 views give their Uint16 words.
   */
  typedArray(): TypedArray {
    if (!this.isContiguous) {
      throw new TensorError(
        `typedArray() needs a contiguous view; shape ${formatShape(this.shape)} has strides ${formatShape(this.strides)}.`,
        {
          code: 'not-contiguous',
          expected: 'a contiguous view',
          actual: { shape: this.shape, strides: this.strides },
          fix: 'call .contiguous().typedArray() (which copies).',
        },
      );
    }
    const array = this.storage.array();
    return array.subarray(this.offset, this.offset + this.numel) as TypedArray;
  }

  /** Copies `source` into this view, element by element in row-major order, converting dtypes. */
  copyFrom(source: TensorView): this {
    if (!shapesEqual(this.shape, source.shape)) {
      throw new TensorError(`copyFrom: shape ${formatShape(source.shape)} into ${formatShape(this.shape)}.`, {
        code: 'shape-mismatch',
        expected: this.shape,
        actual: source.shape,
        fix: 'copy between views of the same shape (use .view() to reshape first).',
      });
    }
    if (this.numel === 0) return this;
    if (this.isContiguous && source.isContiguous) {
      convertContiguous(source.typedArray(), source.dtype, this.typedArray(), this.dtype);
      return this;
    }
    const target = this.storage.array();
    const input = source.storage.array();
    const decode = codecFor(source.dtype).decode;
    const encode = codecFor(this.dtype).encode;
    const sameDType = source.dtype === this.dtype;
    const targetOffsets = elementOffsets(this);
    const sourceOffsets = elementOffsets(source);
    for (let index = 0; index < targetOffsets.length; index++) {
      const word = input[sourceOffsets[index]!]!;
      target[targetOffsets[index]!] = sameDType ? word : encode(decode(word));
    }
    return this;
  }

  /** Sets every element to `value` (converted to the dtype). */
  fill(value: number): this {
    const word = codecFor(this.dtype).encode(value);
    if (this.isContiguous) {
      const values = this.typedArray();
      if (Object.is(word, 0))
        zeroFill(values); // see [Note: zeroing shared memory]
      else values.fill(word);
      return this;
    }
    const target = this.storage.array();
    for (const offset of elementOffsets(this)) target[offset] = word;
    return this;
  }

  /** One element, decoded to a number. */
  get(index: readonly number[]): number {
    return codecFor(this.dtype).decode(this.storage.array()[this.offsetOf(index)]!);
  }

  /** Writes `value` at `index` (one index per dimension). */
  set(index: readonly number[], value: number): void {
    this.storage.array()[this.offsetOf(index)] = codecFor(this.dtype).encode(value);
  }

  /** The elements in row-major order as plain numbers (a copy; decodes 16-bit floats). */
  toArray(): number[] {
    const array = this.storage.array();
    const decode = codecFor(this.dtype).decode;
    return Array.from(elementOffsets(this), (offset) => decode(array[offset]!));
  }

  /** The storage element index of a multi-index. */
  offsetOf(index: readonly number[]): number {
    if (
      index.length !== this.rank ||
      index.some(
        (position, dim) => !Number.isInteger(position) || position < 0 || position >= this.shape[dim]!,
      )
    ) {
      throw new TensorError(
        `Index ${formatShape(index)} is out of bounds for shape ${formatShape(this.shape)}.`,
        {
          code: 'view-out-of-bounds',
          expected: `one index per dim, each in [0, size)`,
          actual: index,
          fix: 'check the index against the view shape.',
        },
      );
    }
    let offset = this.offset;
    for (let dim = 0; dim < index.length; dim++) offset += index[dim]! * this.strides[dim]!;
    return offset;
  }

  /** The view's dtype, shape, offset and strides, for messages. */
  toString(): string {
    return `TensorView(${this.dtype}${formatShape(this.shape)}, offset ${this.offset}, strides ${formatShape(this.strides)})`;
  }
}

export { elementOffsets } from './internal/view-geometry';
