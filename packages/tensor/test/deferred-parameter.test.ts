import {
  Parameter,
  type ParameterInitializer,
  Storage,
  StorageFreedError,
  TensorError,
  TensorView,
} from '@fsdp-ts/tensor';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

/** Element i is i * scale: any range is computable on its own. */
function ramp(scale: number): ParameterInitializer & { calls: [number, number][] } {
  const calls: [number, number][] = [];
  return {
    description: `ramp(${scale})`,
    calls,
    fill(target, start) {
      calls.push([start, target.numel]);
      const array = target.typedArray();
      for (let index = 0; index < array.length; index++) array[index] = (start + index) * scale;
    },
  };
}

describe('deferred Parameter', () => {
  it('holds no memory until materialised, then has the initializer values', () => {
    const initializer = ramp(2);
    const parameter = Parameter.deferred([3, 4], initializer, { name: 'w' });
    expect(parameter.isDeferred).toBe(true);
    expect(parameter.initializer).toBe(initializer);
    expect(parameter.shape).toEqual([3, 4]);
    expect(parameter.data.storage.isAllocated).toBe(false);
    expect(() => parameter.data.toArray()).toThrow(StorageFreedError);
    expect(String(parameter)).toContain('deferred ramp(2)');
    parameter.materialize();
    expect(parameter.isDeferred).toBe(false);
    expect(parameter.data.toArray()).toEqual(Array.from({ length: 12 }, (_, index) => index * 2));
    expect(initializer.calls).toEqual([[0, 12]]);
    parameter.materialize(); // no-op once materialised
    expect(initializer.calls).toHaveLength(1);
  });

  it('copies any range without making the rest, deferred or not', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 50 }), fc.nat(), fc.nat(), (numel, a, b) => {
        const start = a % numel;
        const length = b % (numel - start + 1);
        const initializer = ramp(0.5);
        const deferred = Parameter.deferred([numel], initializer);
        const target = TensorView.zeros([length]);
        deferred.copyValuesInto(target, start);
        const expected = Array.from({ length }, (_, index) => (start + index) * 0.5);
        expect(target.toArray()).toEqual(expected);
        expect(deferred.data.storage.isAllocated).toBe(false);
        expect(initializer.calls).toEqual(length === 0 ? [] : [[start, length]]);
        const eager = Parameter.fromArray(
          Array.from({ length: numel }, (_, index) => index * 0.5),
          [numel],
        );
        const eagerTarget = TensorView.zeros([length]);
        eager.copyValuesInto(eagerTarget, start);
        expect(eagerTarget.toArray()).toEqual(expected);
      }),
    );
  });

  it('stops being deferred when data is pointed at values', () => {
    const parameter = Parameter.deferred([4], ramp(1));
    parameter.data = TensorView.fromArray([9, 8, 7, 6], [4]);
    expect(parameter.isDeferred).toBe(false);
    expect(parameter.data.toArray()).toEqual([9, 8, 7, 6]);
  });

  it('rejects a range outside the parameter or a target of another dtype', () => {
    const parameter = Parameter.deferred([4], ramp(1));
    expect(() => parameter.copyValuesInto(TensorView.zeros([3]), 2)).toThrow(TensorError);
    expect(() => parameter.copyValuesInto(TensorView.zeros([3]), 2)).toThrow(/\[2, 5\)/);
    expect(() => parameter.copyValuesInto(TensorView.zeros([2], 'int32'), 0)).toThrow(/float32/);
  });

  it('Storage.unallocated starts freed and allocates zero-filled', () => {
    const storage = Storage.unallocated('float32', 5, { shared: true });
    expect(storage.isAllocated).toBe(false);
    storage.allocate();
    expect(Array.from(storage.array())).toEqual([0, 0, 0, 0, 0]);
    expect(storage.buffer() instanceof SharedArrayBuffer).toBe(true);
  });
});
