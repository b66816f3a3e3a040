import {
  locateParameterRange,
  parseFlatParamMetadata,
  shardIntersection,
  withWorldSize,
} from '@fsdp-ts/flat-param';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { alignmentArbitrary, createRanks, specsArbitrary, worldSizeArbitrary } from './support/fixtures';

describe('resharding a checkpoint from metadata alone', () => {
  it('rebuilds the shards of any other world size from saved shards + JSON metadata', () => {
    fc.assert(
      fc.property(
        specsArbitrary,
        worldSizeArbitrary,
        worldSizeArbitrary,
        alignmentArbitrary,
        (specs, savedWorldSize, loadWorldSize, alignment) => {
          const saved = createRanks(specs, savedWorldSize, alignment).handles;
          // The checkpoint: JSON metadata and each rank's shard, nothing else.
          const metadata = parseFlatParamMetadata(JSON.parse(JSON.stringify(saved[0]!.metadata())));
          const savedShards = saved.map((handle) => Float32Array.from(handle.shardedBuffer().typedArray()));

          const target = withWorldSize(metadata, loadWorldSize);
          const expected = createRanks(specs, loadWorldSize, alignment).handles;
          for (let rank = 0; rank < loadWorldSize; rank++) {
            const shard = new Float32Array(target.shardNumel);
            metadata.parameters.forEach((_, index) => {
              const wanted = shardIntersection(target, rank, index);
              if (wanted.length === 0) return;
              for (const piece of locateParameterRange(
                metadata,
                index,
                wanted.offsetInParam,
                wanted.length,
              )) {
                const source = savedShards[piece.rank]!.subarray(
                  piece.offsetInShard,
                  piece.offsetInShard + piece.length,
                );
                shard.set(source, wanted.offsetInShard + (piece.offsetInParam - wanted.offsetInParam));
              }
            });
            expect(Array.from(shard)).toEqual(Array.from(expected[rank]!.shardedBuffer().typedArray()));
          }
        },
      ),
    );
  });
});
