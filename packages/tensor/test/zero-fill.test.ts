import { TensorView } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';
import { zeroFill } from '../src/zero-fill';

describe('zeroFill', () => {
  for (const shared of [true, false]) {
    it(`zeroes exactly the view's bytes (${shared ? 'SharedArrayBuffer' : 'ArrayBuffer'}, sizes around the block)`, () => {
      for (const bytes of [0, 1, 3, 65_535, 65_536, 65_537, 3 * 65_536 + 12]) {
        const buffer = shared ? new SharedArrayBuffer(bytes + 16) : new ArrayBuffer(bytes + 16);
        const all = new Uint8Array(buffer);
        all.fill(7);
        zeroFill(new Uint8Array(buffer, 8, bytes));
        expect(all.subarray(0, 8).every((byte) => byte === 7)).toBe(true);
        expect(all.subarray(8, 8 + bytes).every((byte) => byte === 0)).toBe(true);
        expect(all.subarray(8 + bytes).every((byte) => byte === 7)).toBe(true);
      }
    });
  }

  it('TensorView.fill(0) zeroes a shared float32 view and keeps fill(-0) a negative zero', () => {
    const view = TensorView.zeros([70_000], 'float32', { shared: true });
    view.fill(1.5);
    view.fill(0);
    expect(view.typedArray().every((value) => Object.is(value, 0))).toBe(true);
    view.fill(-0);
    expect(Object.is(view.typedArray()[69_999], -0)).toBe(true);
  });
});
