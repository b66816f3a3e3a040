import { describe, expect, it } from 'vitest';
import { MemoryPressureCollector, PRESSURE_FRACTION } from '../src/internal/memory-pressure';
import { rankMemoryCap } from '../src/memory-limit';

const MiB = 1024 ** 2;

/** 256 MiB that nothing references once this returns; the WeakRef says whether it was collected. */
function garbage(): WeakRef<ArrayBuffer> {
  const buffer = new ArrayBuffer(256 * MiB);
  new Uint8Array(buffer).fill(1); // touched, so it is resident
  return new WeakRef(buffer);
}

/** WeakRef targets are kept until the job that created them ends. */
const nextJob = () => new Promise((resolve) => setImmediate(resolve));

describe('collecting under a memory cap', () => {
  it('collects freed buffers once the resident set passes the line, and not again without growth', async () => {
    const resident = process.memoryUsage.rss();
    // A cap whose line sits below today's resident set.
    const collector = new MemoryPressureCollector((0.5 * resident) / PRESSURE_FRACTION);
    const reference = garbage();
    await nextJob();
    collector.check();
    expect(collector.collections).toBe(1);
    // (compared as a boolean: a failure message must not print 256 MiB)
    expect(reference.deref() === undefined).toBe(true);
    collector.check();
    expect(collector.collections).toBe(1);
  });

  it('does nothing below the line or without a cap', async () => {
    const far = new MemoryPressureCollector(64 * process.memoryUsage.rss());
    const none = new MemoryPressureCollector(undefined);
    garbage();
    await nextJob();
    far.check();
    none.check();
    expect(far.collections).toBe(0);
    expect(none.collections).toBe(0);
  });

  it('takes the cap from FSDP_MEMORY_LIMIT_BYTES, and never from free memory', () => {
    expect(rankMemoryCap({ FSDP_MEMORY_LIMIT_BYTES: String(2 * 1024 * MiB) })).toBe(2 * 1024 * MiB);
    const withoutVariable = rankMemoryCap({});
    // Either the cgroup's limit (a real cap) or none; never a share of free memory.
    if (withoutVariable !== undefined) expect(withoutVariable).toBeGreaterThan(0);
  });
});
