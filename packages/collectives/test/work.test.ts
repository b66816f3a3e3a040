import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allocateShared, CollectiveError, initProcessGroup, type ProcessGroup, Work } from '../src/index.js';

describe('Work handles and argument checks (one-rank shm group)', () => {
  let group: ProcessGroup;
  beforeAll(async () => {
    group = await initProcessGroup({ backend: 'shm', timeoutMs: 10_000 });
  });
  afterAll(async () => {
    await group.destroy();
  });

  it('returns a Work at once; wait() and await both complete it', async () => {
    const buffer = allocateShared(Float32Array, 3);
    buffer.set([1, 2, 3]);
    const work = group.allReduce(buffer, { op: 'max' });
    expect(work).toBeInstanceOf(Work);
    work.wait();
    expect(work.isCompleted()).toBe(true);
    expect([...buffer]).toEqual([1, 2, 3]);
    const gathered = allocateShared(Int32Array, 2);
    await group.allGather(gathered, Int32Array.of(7, 8));
    expect([...gathered]).toEqual([7, 8]);
  });

  it('copies ordinary (non-shared) buffers once and writes results back when the op is waited for', () => {
    const input = Float32Array.of(4, 5);
    const output = new Float32Array(2);
    group.reduceScatter(output, input, { op: 'avg' }).wait();
    expect([...output]).toEqual([4, 5]);
    const received = new Uint16Array(1);
    const work = group.broadcast(received, { dtype: 'bfloat16', root: 0 });
    work.wait();
    expect(received[0]).toBe(0);
  });

  it('rejects invalid arguments synchronously with CollectiveError (invalid-argument)', () => {
    const cases: (() => unknown)[] = [
      () => group.allReduce(new Uint16Array(2)),
      () => group.allReduce(new Int32Array(2), { op: 'avg' }),
      () => group.allGather(new Float32Array(3), new Float32Array(2)),
      () => group.reduceScatter(new Float32Array(1), new Float32Array(2)),
      () => group.broadcast(new Float32Array(1), { root: 1 }),
      () => group.send(new Float32Array(1), 0),
      () => group.allGather(new Int32Array(1), new Float32Array(1)),
      () => group.allReduce(new Int32Array(1), { wireDtype: 'bfloat16' }),
      () => group.allReduce(new Float64Array(1) as unknown as Float32Array),
    ];
    for (const call of cases) {
      expect(call).toThrow(CollectiveError);
      try {
        call();
      } catch (error) {
        expect((error as CollectiveError).code).toBe('invalid-argument');
        expect((error as CollectiveError).message).toMatch(/Fix:/);
      }
    }
  });

  it('zero-length buffers complete', () => {
    group.allReduce(allocateShared(Float32Array, 0)).wait();
    group.allGather(new Float32Array(0), new Float32Array(0)).wait();
    group.barrier().wait();
  });

  it('after destroy, ops throw code closed and destroy is idempotent', async () => {
    const other = await initProcessGroup({ backend: 'shm', name: 'other' });
    await other.destroy();
    await other.destroy();
    expect(() => other.barrier()).toThrow(expect.objectContaining({ code: 'closed' }));
  });
});
