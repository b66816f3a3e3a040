import { Storage, TensorError, TensorView } from '@fsdp-ts/tensor';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

/** Independent reference: the storage index of a multi-index from offset and strides. */
function referenceOffset(offset: number, strides: readonly number[], index: readonly number[]): number {
  return index.reduce((sum, position, dim) => sum + position * strides[dim]!, offset);
}

function allIndices(shape: readonly number[]): number[][] {
  if (shape.length === 0) return [[]];
  const [first, ...rest] = shape;
  const tails = allIndices(rest);
  const result: number[][] = [];
  for (let position = 0; position < first!; position++)
    for (const tail of tails) result.push([position, ...tail]);
  return result;
}

const shapeArbitrary = fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 0, maxLength: 4 });

describe('TensorView', () => {
  it('addresses every element at offset + sum(index * stride), for contiguous and permuted views', () => {
    fc.assert(
      fc.property(shapeArbitrary, fc.integer({ min: 0, max: 5 }), fc.nat(), (shape, offset, seed) => {
        const numel = shape.reduce((product, size) => product * size, 1);
        const storage = Storage.allocate('float32', numel + offset);
        const values = storage.array() as Float32Array;
        for (let index = 0; index < values.length; index++) values[index] = index;
        const base = new TensorView(storage, offset, shape);
        const order = shape
          .map((_, dim) => dim)
          .sort((a, b) => ((a * 7919 + seed) % 13) - ((b * 7919 + seed) % 13));
        for (const view of [base, base.permute(order)]) {
          const flat = view.toArray();
          allIndices(view.shape).forEach((index, position) => {
            expect(flat[position]).toBe(referenceOffset(view.offset, view.strides, index));
            expect(view.get(index)).toBe(referenceOffset(view.offset, view.strides, index));
          });
        }
      }),
    );
  });

  it('narrow keeps pointing at the root storage and at the right elements', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 3 }),
        fc.nat(),
        fc.nat(),
        (shape, dimSeed, startSeed) => {
          const view = TensorView.zeros(shape);
          const array = view.typedArray();
          for (let index = 0; index < array.length; index++) array[index] = index;
          const dim = dimSeed % shape.length;
          const start = startSeed % shape[dim]!;
          const length = shape[dim]! - start;
          const narrowed = view.narrow(dim, start, length);
          const twice = narrowed.narrow(dim, 0, length);
          expect(twice.storage).toBe(view.storage);
          for (const index of allIndices(narrowed.shape)) {
            const original = [...index];
            original[dim] = index[dim]! + start;
            expect(twice.get(index)).toBe(view.get(original));
          }
        },
      ),
    );
  });

  it('view() reshapes without copying and refuses where no copy-free view exists', () => {
    const base = TensorView.zeros([2, 3, 4]);
    const reshaped = base.view([6, -1]);
    expect(reshaped.shape).toEqual([6, 4]);
    reshaped.set([5, 3], 7);
    expect(base.get([1, 2, 3])).toBe(7);
    const transposed = base.transpose(0, 2); // [4, 3, 2]
    expect(transposed.isContiguous).toBe(false);
    expect(() => transposed.view([24])).toThrow(TensorError);
    // Splitting a single non-contiguous dim is still copy-free.
    const split = transposed.view([2, 2, 3, 2]);
    expect(split.get([1, 1, 2, 1])).toBe(base.get([1, 2, 3]));
    expect(transposed.contiguous().view([24]).toArray()).toEqual(transposed.toArray());
  });

  it('copyFrom handles strided sources and dtype conversion', () => {
    const source = TensorView.fromArray([1, 2, 3, 4, 5, 6], [2, 3]);
    const target = TensorView.zeros([3, 2], 'bfloat16');
    target.copyFrom(source.transpose(0, 1));
    expect(target.toArray()).toEqual([1, 4, 2, 5, 3, 6]);
    expect(() => target.copyFrom(source)).toThrow(/shape \[2, 3\] into \[3, 2\]/);
  });

  it('typedArray aliases the storage', () => {
    const view = TensorView.zeros([4, 4]);
    const row = view.narrow(0, 2, 1);
    row.typedArray().fill(3);
    expect(view.get([2, 0])).toBe(3);
    expect(view.get([1, 3])).toBe(0);
    expect(() => view.transpose(0, 1).typedArray()).toThrow(/contiguous/);
  });

  it('rejects out-of-range views with the shape and bounds in the message', () => {
    const storage = Storage.allocate('float32', 10);
    expect(() => new TensorView(storage, 4, [2, 4])).toThrow(
      /reaches elements \[4, 11\] of a storage of 10 elements/,
    );
    expect(() => TensorView.zeros([3]).narrow(0, 2, 2)).toThrow(/out of range for shape \[3\]/);
    expect(new TensorView(storage, 10, [0]).numel).toBe(0);
  });
});
