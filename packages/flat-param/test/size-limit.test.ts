import { FlatParamError, FlatParamHandle, MAX_FLAT_NUMEL } from '@fsdp-ts/flat-param';
import { Parameter } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';

// [Note: flat buffer limit], tested at the boundary with a tiny cap in place of 2^32 elements.
function unit(): [string, Parameter][] {
  return [
    ['layer.weight', Parameter.fromArray([1, 2, 3, 4, 5, 6], [3, 2])],
    ['layer.bias', Parameter.fromArray([7, 8], [2])],
  ];
}

describe('flat buffer size limit', () => {
  it('accepts a unit whose padded size equals the cap', () => {
    // 8 elements, padded to a multiple of 2 ranks: 8.
    const handle = FlatParamHandle.create(unit(), { rank: 0, worldSize: 2, maxNumel: 8 });
    expect(handle.layout.paddedNumel).toBe(8);
  });

  it('rejects one element past the cap, naming the parameters, the sizes and the fix', () => {
    // 8 elements padded to a multiple of 3 ranks: 9 > 8.
    let error: unknown;
    try {
      FlatParamHandle.create(unit(), { rank: 0, worldSize: 3, maxNumel: 8 });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(FlatParamError);
    const flatError = error as FlatParamError;
    expect(flatError.code).toBe('too-large');
    expect(flatError.actual).toBe(9);
    expect(flatError.parameters).toEqual(['layer.weight', 'layer.bias']);
    expect(flatError.message).toContain(
      '9 elements (layer.weight, layer.bias) is larger than the 8 elements',
    );
    expect(flatError.message).toContain('wrap smaller units');
  });

  it('defaults to what one typed array can hold', () => {
    expect(MAX_FLAT_NUMEL).toBe(2 ** 32);
    expect(() => new Uint8Array(MAX_FLAT_NUMEL + 1)).toThrow(RangeError);
  });
});
