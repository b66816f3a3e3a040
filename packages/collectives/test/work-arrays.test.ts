import { describe, expect, it } from 'vitest';
import { KEPT_WORK_BYTES, WorkArrays } from '../src/internal/tcp/op-preparation.js';

describe('the tcp engine keeps small work arrays between ops and drops large ones', () => {
  it('reuses a work array up to KEPT_WORK_BYTES and drops a larger one after its op', () => {
    const work = new WorkArrays();
    const small = work.floatScratch(1024);
    work.releaseLarge();
    expect(work.floatScratch(512).buffer).toBe(small.buffer);

    const large = work.floatScratch(KEPT_WORK_BYTES / 4 + 1);
    expect(work.floatScratch(16).buffer).toBe(large.buffer);
    work.releaseLarge();
    const after = work.floatScratch(16);
    expect(after.buffer).not.toBe(large.buffer);
    expect(after.buffer.byteLength).toBe(16 * 4);
  });
});
