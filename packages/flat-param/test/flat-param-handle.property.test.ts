import { shapesEqual } from '@fsdp-ts/tensor';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  alignmentArbitrary,
  allGather,
  createRanks,
  numelOf,
  reduceScatter,
  referenceValue,
  specsArbitrary,
  worldSizeArbitrary,
} from './support/fixtures';

const caseArbitrary = fc.tuple(specsArbitrary, worldSizeArbitrary, alignmentArbitrary);

describe('FlatParamHandle over W simulated ranks', () => {
  it('keeps each rank exactly its part: sharded views hold the right values, together every value once', () => {
    fc.assert(
      fc.property(caseArbitrary, ([specs, worldSize, alignment]) => {
        const { handles, named } = createRanks(specs, worldSize, alignment);
        specs.forEach((spec, index) => {
          const seen = new Array<number>(numelOf(spec.shape)).fill(0);
          handles.forEach((handle, rank) => {
            const parameter = named[rank]![index]![1];
            expect(handle.state).toBe('sharded');
            expect(parameter.shape).toEqual(spec.shape);
            const piece = handle.intersections[index]!;
            expect(parameter.data.shape).toEqual([piece.length]);
            expect(parameter.data.storage).toBe(handle.shardedBuffer().storage);
            parameter.data.toArray().forEach((value, element) => {
              expect(value).toBe(referenceValue(index, piece.offsetInParam + element));
              seen[piece.offsetInParam + element]! += 1;
            });
          });
          expect(seen.every((count) => count === 1)).toBe(true);
        });
      }),
    );
  });

  it('reproduces every original value after gathering the shards and useUnshardedViews()', () => {
    fc.assert(
      fc.property(caseArbitrary, ([specs, worldSize, alignment]) => {
        const { handles, named } = createRanks(specs, worldSize, alignment);
        allGather(handles);
        handles.forEach((handle, rank) => {
          handle.useUnshardedViews();
          expect(handle.state).toBe('unsharded');
          named[rank]!.forEach(([, parameter], index) => {
            expect(shapesEqual(parameter.data.shape, specs[index]!.shape)).toBe(true);
            expect(parameter.data.storage).toBe(handle.unshardedBuffer().storage);
            const expected = Array.from({ length: parameter.numel }, (_, element) =>
              referenceValue(index, element),
            );
            expect(parameter.data.toArray()).toEqual(expected);
          });
          // Padding between and after parameters is zero.
          const flat = handle.unshardedBuffer().toArray();
          const owned = new Array<boolean>(flat.length).fill(false);
          for (const entry of handle.layout.parameters)
            owned.fill(true, entry.offset, entry.offset + entry.numel);
          flat.forEach((value, element) => {
            if (!owned[element]) expect(value).toBe(0);
          });
        });
      }),
    );
  });

  it('sharded views alias exactly their elements of the local shard (mutate and check)', () => {
    fc.assert(
      fc.property(caseArbitrary, ([specs, worldSize, alignment]) => {
        const { handles, named } = createRanks(specs, worldSize, alignment);
        handles.forEach((handle, rank) => {
          const shard = handle.shardedBuffer().typedArray();
          const before = Array.from(shard);
          named[rank]!.forEach(([, parameter], index) => {
            const piece = handle.intersections[index]!;
            for (let element = 0; element < piece.length; element++) {
              // Write through the Parameter, read through the shard, and back.
              parameter.data.set([element], -1 - element);
              expect(shard[piece.offsetInShard + element]).toBe(-1 - element);
              shard[piece.offsetInShard + element] = before[piece.offsetInShard + element]!;
              expect(parameter.data.get([element])).toBe(
                referenceValue(index, piece.offsetInParam + element),
              );
            }
          });
          expect(Array.from(shard)).toEqual(before);
        });
      }),
    );
  });

  it('switching back and forth never copies and never changes a Parameter identity', () => {
    fc.assert(
      fc.property(caseArbitrary, fc.integer({ min: 1, max: 3 }), ([specs, worldSize, alignment], rounds) => {
        const { handles, named } = createRanks(specs, worldSize, alignment);
        const objects = named.map((pairs) => pairs.map(([, parameter]) => parameter));
        allGather(handles);
        for (let round = 0; round < rounds; round++) {
          handles.forEach((handle, rank) => {
            handle.useUnshardedViews();
            const unsharded = handle.unshardedBuffer().typedArray();
            handle.parameters.forEach((parameter, index) => {
              expect(parameter).toBe(objects[rank]![index]);
              // The very view built at creation: no new view, no copy.
              expect(parameter.data).toBe(handle.unshardedView(index));
              if (parameter.numel > 0) {
                const offset = handle.layout.parameters[index]!.offset;
                unsharded[offset] = 7777;
                expect(parameter.data.typedArray()[0]).toBe(7777);
                unsharded[offset] = referenceValue(index, 0);
              }
            });
            handle.useShardedViews();
            handle.parameters.forEach((parameter, index) => {
              expect(parameter).toBe(objects[rank]![index]);
              expect(parameter.data).toBe(handle.shardedView(index));
            });
          });
        }
        expect(named.every((pairs, rank) => pairs.every(([, p], index) => p === objects[rank]![index]))).toBe(
          true,
        );
      }),
    );
  });

  it('gradient views: full shape into the unsharded gradient, then each rank’s reduced part; null when frozen', () => {
    fc.assert(
      fc.property(caseArbitrary, ([specs, worldSize, alignment]) => {
        const { handles } = createRanks(specs, worldSize, alignment);
        allGather(handles);
        handles.forEach((handle, rank) => {
          handle.useUnshardedViews();
          const flat = handle.unshardedGradBuffer();
          handle.parameters.forEach((parameter, index) => {
            if (specs[index]!.frozen) {
              expect(parameter.grad).toBeNull();
              return;
            }
            expect(parameter.grad!.storage).toBe(flat.storage);
            expect(parameter.grad!.shape).toEqual(specs[index]!.shape);
            // Autograd on rank r produces (r + 1) × the reference value.
            parameter.grad!.typedArray().forEach((_, element, array) => {
              array[element] = (rank + 1) * referenceValue(index, element);
            });
          });
        });
        reduceScatter(handles);
        const rankSum = (worldSize * (worldSize + 1)) / 2;
        handles.forEach((handle) => {
          handle.setGradientsPresent(true);
          handle.useShardedViews();
          const shardGrad = handle.shardedGradBuffer().typedArray();
          handle.parameters.forEach((parameter, index) => {
            if (specs[index]!.frozen) {
              expect(parameter.grad).toBeNull();
              return;
            }
            const piece = handle.intersections[index]!;
            expect(parameter.grad!.shape).toEqual([piece.length]);
            parameter.grad!.toArray().forEach((value, element) => {
              expect(value).toBe(Math.fround(rankSum * referenceValue(index, piece.offsetInParam + element)));
            });
            if (piece.length > 0) {
              parameter.grad!.set([0], 31);
              expect(shardGrad[piece.offsetInShard]).toBe(31);
            }
          });
        });
      }),
    );
  });
});
