import { Parameter, Storage, StorageFreedError, TensorError, TensorView } from '@fsdp-ts/tensor';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

describe('Storage', () => {
  it('frees and re-allocates in place while views stay valid objects', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 300 }),
        fc.constantFrom('float32', 'bfloat16', 'int32', 'uint8' as const),
        fc.boolean(),
        (numel, dtype, shared) => {
          const storage = Storage.allocate(dtype, numel, { shared });
          const view = new TensorView(storage, 0, [numel]);
          expect(storage.byteOffset() % 64).toBe(0);
          expect(storage.buffer().byteLength % 64).toBe(0);
          expect(storage.buffer() instanceof SharedArrayBuffer).toBe(shared);
          view.fill(3);
          storage.free();
          expect(storage.isAllocated).toBe(false);
          expect(() => view.toArray()).toThrow(StorageFreedError);
          expect(() => view.toArray()).toThrow(/freed/);
          storage.allocate();
          expect(view.toArray()).toEqual(new Array(numel).fill(0));
          view.fill(2);
          expect(view.toArray()).toEqual(new Array(numel).fill(2));
        },
      ),
    );
  });

  it('rejects negative or fractional sizes with the value in the message', () => {
    expect(() => Storage.allocate('float32', -1)).toThrow(/Invalid storage size -1/);
    expect(() => Storage.allocate('float32', 1.5)).toThrow(TensorError);
  });
});

describe('Parameter', () => {
  it('re-points data and grad in O(1), keeping identity and original shape', () => {
    const parameter = Parameter.fromArray([1, 2, 3, 4, 5, 6], [2, 3], { name: 'weight' });
    const flat = Storage.allocate('float32', 16, { shared: true });
    const full = new TensorView(flat, 4, [2, 3]);
    full.copyFrom(parameter.data);
    const before = parameter;
    parameter.data = full;
    expect(parameter).toBe(before);
    expect(parameter.data.storage).toBe(flat);
    expect(parameter.isFullShape).toBe(true);
    const shard = new TensorView(flat, 6, [3]);
    parameter.data = shard;
    expect(parameter.shape).toEqual([2, 3]);
    expect(parameter.isFullShape).toBe(false);
    expect(parameter.data.toArray()).toEqual([3, 4, 5]);
    parameter.data = new TensorView(flat, 0, [0]);
    expect(parameter.data.numel).toBe(0);
    parameter.grad = new TensorView(flat, 6, [3]);
    expect(parameter.grad?.numel).toBe(3);
    parameter.grad = null;
    expect(parameter.grad).toBeNull();
  });

  it('refuses views that cannot be this parameter', () => {
    const parameter = Parameter.zeros([2, 3]);
    expect(() => {
      parameter.data = TensorView.zeros([3, 2]);
    }).toThrow(/cannot point data at a view of shape \[3, 2\]/);
    expect(() => {
      parameter.data = TensorView.zeros([7]);
    }).toThrow(/at most 6 elements/);
    expect(() => {
      parameter.data = TensorView.zeros([2, 3], 'int32');
    }).toThrow(/int32/);
  });
});
