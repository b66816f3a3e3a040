import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { KEPT_WORK_BYTES, WORK_RELEASE_IDLE_MS, WorkArrays } from '../src/internal/tcp/op-preparation.js';

describe('[Note: work arrays dropped when idle]', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('keeps a work array up to KEPT_WORK_BYTES however long the engine idles', () => {
    const work = new WorkArrays();
    const small = work.floatScratch(1024);
    work.releaseLargeWhenIdle();
    vi.advanceTimersByTime(10 * WORK_RELEASE_IDLE_MS);
    expect(work.floatScratch(512).buffer).toBe(small.buffer);
  });

  it('keeps a larger one while ops follow each other and drops it once the engine idles', () => {
    const work = new WorkArrays();
    const large = work.floatScratch(KEPT_WORK_BYTES / 4 + 1);
    work.releaseLargeWhenIdle();
    vi.advanceTimersByTime(WORK_RELEASE_IDLE_MS - 1);
    // The next op uses it before the idle time ends: the pending drop is cancelled.
    expect(work.floatScratch(16).buffer).toBe(large.buffer);
    vi.advanceTimersByTime(10 * WORK_RELEASE_IDLE_MS);
    expect(work.floatScratch(16).buffer).toBe(large.buffer);
    work.releaseLargeWhenIdle();
    vi.advanceTimersByTime(WORK_RELEASE_IDLE_MS);
    const after = work.floatScratch(16);
    expect(after.buffer).not.toBe(large.buffer);
    expect(after.buffer.byteLength).toBe(16 * 4);
  });
});
