import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { KEPT_WORK_BYTES, WORK_RELEASE_IDLE_MS, WorkArrays } from '../src/internal/tcp/op-preparation.js';

describe('[Note: work arrays dropped when idle]', () => {
  it('keeps a work array up to KEPT_WORK_BYTES however long the engine idles', async () => {
    const work = new WorkArrays();
    const small = work.floatScratch(1024);
    work.releaseLargeWhenIdle();
    await sleep(WORK_RELEASE_IDLE_MS + 100);
    expect(work.floatScratch(512).buffer).toBe(small.buffer);
  });

  it('keeps a larger one while ops follow each other and drops it once the engine idles', async () => {
    const work = new WorkArrays();
    const large = work.floatScratch(KEPT_WORK_BYTES / 4 + 1);
    work.releaseLargeWhenIdle();
    await sleep(WORK_RELEASE_IDLE_MS / 5);
    // The next op uses it before the idle time ends: the pending drop is cancelled.
    expect(work.floatScratch(16).buffer).toBe(large.buffer);
    await sleep(WORK_RELEASE_IDLE_MS + 100);
    expect(work.floatScratch(16).buffer).toBe(large.buffer);
    work.releaseLargeWhenIdle();
    await sleep(WORK_RELEASE_IDLE_MS + 100);
    const after = work.floatScratch(16);
    expect(after.buffer).not.toBe(large.buffer);
    expect(after.buffer.byteLength).toBe(16 * 4);
  });
});
