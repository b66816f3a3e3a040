import { type DType, Parameter } from '@fsdp-ts/tensor';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { allGather, handlesPerRank, numelOf, specsArbitrary, worldSizeArbitrary } from './support/fixtures';

const dtypeArbitrary = fc.constantFrom<DType>('float32', 'bfloat16', 'float16', 'int32', 'uint8');

/** Small integers: exact in every dtype (bfloat16 holds integers up to 256 exactly). */
const value = (parameter: number, element: number) => (parameter * 31 + element) % 251;

describe('every dtype', () => {
  it('flattens, shards and gathers back the exact storage words', () => {
    fc.assert(
      fc.property(specsArbitrary, worldSizeArbitrary, dtypeArbitrary, (specs, worldSize, dtype) => {
        const named = Array.from({ length: worldSize }, () =>
          specs.map((spec, index): [string, Parameter] => [
            `p${index}`,
            Parameter.fromArray(
              Array.from({ length: numelOf(spec.shape) }, (_, element) => value(index, element)),
              spec.shape,
              { dtype, requiresGrad: !spec.frozen },
            ),
          ]),
        );
        const words = named[0]!.map(([, parameter]) => Array.from(parameter.data.typedArray()));
        const handles = handlesPerRank(named, { alignment: 3 });
        expect(handles[0]!.shardedBuffer().dtype).toBe(dtype);
        allGather(handles);
        handles.forEach((handle, rank) => {
          handle.useUnshardedViews();
          named[rank]!.forEach(([, parameter], index) => {
            expect(Array.from(parameter.data.typedArray())).toEqual(words[index]);
          });
        });
      }),
    );
  });
});
