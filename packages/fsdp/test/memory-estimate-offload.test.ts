import {
  estimateMemoryPerRank,
  FsdpError,
  memoryWarning,
  type OffloadPlacement,
  smallestFittingWorldSize,
} from '@fsdp-ts/fsdp';
import { describe, expect, it } from 'vitest';
import {
  OFFLOAD_CHUNK_BYTES,
  OFFLOAD_DIRTY_WINDOW_BYTES,
  OFFLOAD_PARAMETER_READ_AHEAD,
  OFFLOAD_SLOTS,
  OFFLOAD_STAGED_CHUNKS,
} from '../src/memory-estimate';

// [Note: memory with offload]: a root of 10 M elements and 8 blocks of 100 M (810 M in all), W = 4.
const units = [
  { isRoot: true, paddedNumel: 10_000_000 },
  ...Array.from({ length: 8 }, () => ({ isRoot: false, paddedNumel: 100_000_000 })),
];
const owned = 810_000_000 / 4;
const MiB = 1024 ** 2;
const estimate = (offload?: OffloadPlacement, worldSize = 4) =>
  estimateMemoryPerRank({
    units,
    worldSize,
    strategy: 'full-shard',
    ...(offload === undefined ? {} : { offload }),
  });
/** Staged chunks: OFFLOAD_STAGED_CHUNKS chunks of the elements whose Adam state is a chunk's bytes. */
const stagedElements = (OFFLOAD_STAGED_CHUNKS * OFFLOAD_CHUNK_BYTES) / 8;

describe('memory estimate with offload', () => {
  it("optimizerState 'disk' removes 8·P/W and adds the staged chunks and the dirty window", () => {
    const none = estimate();
    const disk = estimate({ optimizerState: 'disk' });
    expect(none.optimizerStateBytes).toBe(8 * owned);
    expect(disk.optimizerStateBytes).toBe(0);
    expect(disk.offloadStagingBytes).toBe(8 * stagedElements);
    expect(disk.pageCacheBytes).toBe(OFFLOAD_DIRTY_WINDOW_BYTES);
    expect(disk.totalBytes).toBe(
      none.totalBytes - 8 * owned + disk.offloadStagingBytes + OFFLOAD_DIRTY_WINDOW_BYTES,
    );
    expect(disk.diskBytes).toBe(OFFLOAD_SLOTS * 8 * owned);
    expect(disk.hostOptimizerStateBytes).toBe(0);
    expect(disk.deviceBytes).toBe(disk.totalBytes);
    // Nothing offloaded: the estimate is the model's, nothing staged, nothing on disk.
    expect(none.offloadStagingBytes + none.pageCacheBytes + none.diskBytes).toBe(0);
    expect(none.totalBytes).toBe(16 * owned + 8 * 210_000_000);
    expect(estimate({ optimizerState: 'none', parameters: 'none' })).toEqual(none);
  });

  it("optimizerState 'memory' moves the state to host memory: out of deviceBytes, in totalBytes", () => {
    const none = estimate();
    const memory = estimate({ optimizerState: 'memory' });
    expect(memory.optimizerStateBytes).toBe(0);
    expect(memory.hostOptimizerStateBytes).toBe(OFFLOAD_SLOTS * 8 * owned);
    expect(memory.deviceBytes).toBe(none.totalBytes - 8 * owned + 8 * stagedElements);
    expect(memory.totalBytes).toBe(memory.deviceBytes + memory.hostOptimizerStateBytes);
    expect(memory.pageCacheBytes + memory.diskBytes).toBe(0);
  });

  it("parameters 'disk' keeps only the shards of the root and the units resident or read ahead", () => {
    const both = estimate({ optimizerState: 'disk', parameters: 'disk' });
    const resident = (10_000_000 + (1 + OFFLOAD_PARAMETER_READ_AHEAD) * 100_000_000) / 4;
    expect(both.parametersBytes).toBe(4 * resident);
    // The optimizer step holds every shard again, with nothing gathered: the peak is the larger phase.
    expect(both.stepParametersBytes).toBe(4 * owned);
    expect(both.deviceBytes).toBe(
      Math.max(both.parametersBytes + both.gatheredBytes, both.stepParametersBytes) +
        both.gradientsBytes +
        both.offloadStagingBytes +
        both.pageCacheBytes,
    );
    expect(both.gradientsBytes).toBe(4 * owned);
    expect(both.offloadStagingBytes).toBe(12 * stagedElements);
    expect(both.diskBytes).toBe(OFFLOAD_SLOTS * 12 * owned);
    // A model of fewer units than the read-ahead keeps no more than its own shards.
    const small = estimateMemoryPerRank({
      units: units.slice(0, 2),
      worldSize: 2,
      strategy: 'full-shard',
      offload: { parameters: 'disk' },
    });
    expect(small.parametersBytes).toBe((4 * 110_000_000) / 2);
  });

  it('stages and dirties no more than the shard itself when it is smaller than the chunks', () => {
    const tiny = estimateMemoryPerRank({
      units: [
        { isRoot: true, paddedNumel: 1000 },
        { isRoot: false, paddedNumel: 3000 },
      ],
      worldSize: 2,
      strategy: 'full-shard',
      offload: { optimizerState: 'disk' },
    });
    expect(tiny.offloadStagingBytes).toBe(8 * 2000);
    expect(tiny.pageCacheBytes).toBe(8 * 2000);
  });

  it('rejects an offload key it does not know, naming it', () => {
    const bad = () =>
      estimateMemoryPerRank({
        units,
        worldSize: 4,
        strategy: 'full-shard',
        offload: { optimizerStat: 'disk' } as unknown as OffloadPlacement,
      });
    expect(bad).toThrow(FsdpError);
    expect(bad).toThrow(/optimizerStat/);
  });

  it('smallestFittingWorldSize counts the offload', () => {
    // 4000 MiB: 16·810M/8 + 8·210M fits first without offload (W = 4 needs 4692 MiB); with the
    // state on disk 8·810M/4 + 8·210M + 128 MiB staged + 64 MiB dirty ≈ 3339 MiB fits at W = 4.
    expect(smallestFittingWorldSize(units, 4000 * MiB)).toBe(8);
    expect(smallestFittingWorldSize(units, 4000 * MiB, 8, { optimizerState: 'disk' })).toBe(4);
  });
});

describe('memory warning with offload', () => {
  // W = 4: parameters 772.5 + gradients 772.5 + Adam 1545.0 + gathered 1602.2 ≈ 4692 MiB; the
  // state on disk ≈ 3339 MiB; the parameters too ≈ 2926 MiB.
  const limit = { bytes: 4000 * MiB, source: 'a test budget' };

  it('names the offload setting that fits at this world size', () => {
    const warning = memoryWarning(estimate(), limit, 'full-shard', 4, units);
    expect(warning).toContain('FSDP estimates 4692.');
    expect(warning).toContain('Adam state 1545.0 MiB');
    expect(warning).toContain("offload: { optimizerState: 'disk' } fits at this world size (estimated 3339.");
    expect(warning).toContain("'full-shard' at a world size of 8 or more fits");
  });

  it("describes an offloaded estimate, and suggests the parameters too when the state's alone is not enough", () => {
    const tight = { bytes: 3000 * MiB, source: 'a tighter budget' };
    const disk = estimate({ optimizerState: 'disk' });
    const warning = memoryWarning(disk, tight, 'full-shard', 4, units, { optimizerState: 'disk' });
    expect(warning).toContain('Adam state on disk');
    expect(warning).toContain('offload chunks 128.0 MiB, dirty page cache 64.0 MiB');
    expect(warning).toContain("offload: { optimizerState: 'disk', parameters: 'disk' } fits");
    // Host memory counts: 'memory' makes a capped rank need more, and the warning says so.
    const memory = estimate({ optimizerState: 'memory' });
    const inHost = memoryWarning(memory, limit, 'full-shard', 4, units, { optimizerState: 'memory' });
    expect(inHost).toContain('Adam state in host memory 3089.9 MiB (both slots)');
    expect(inHost).toContain("offload: { optimizerState: 'disk' } fits");
  });

  it('says nothing once the offloaded estimate fits', () => {
    expect(
      memoryWarning(estimate({ optimizerState: 'disk' }), limit, 'full-shard', 4, units, {
        optimizerState: 'disk',
      }),
    ).toBeUndefined();
  });
});
