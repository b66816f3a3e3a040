import { Worker } from 'node:worker_threads';
import { FlatParamHandle } from '@fsdp-ts/flat-param';
import { Parameter } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';

/** A worker thread (as collectives' communication worker) writing into the handle's buffers. */
const workerSource = `
const { parentPort, workerData } = require('node:worker_threads');
const shard = new Float32Array(workerData.shard, workerData.shardOffset, workerData.shardLength);
const unsharded = new Float32Array(workerData.unsharded, workerData.unshardedOffset, workerData.unshardedLength);
for (let i = 0; i < shard.length; i++) shard[i] = shard[i] * 10;
for (let i = 0; i < unsharded.length; i++) unsharded[i] = i + 100;
parentPort.postMessage('done');
`;

describe('buffers are shared with worker threads', () => {
  it('lets a worker thread read and write the shard and the unsharded buffer in place', async () => {
    const weight = Parameter.fromArray([1, 2, 3, 4, 5, 6], [2, 3]);
    const bias = Parameter.fromArray([7, 8], [2]);
    const handle = FlatParamHandle.create(
      [
        ['w', weight],
        ['b', bias],
      ],
      { rank: 1, worldSize: 2 },
    );
    const shard = handle.shardedBuffer().typedArray();
    const unsharded = handle.unshardedBuffer().typedArray();
    expect(shard.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(unsharded.buffer).toBeInstanceOf(SharedArrayBuffer);
    const worker = new Worker(workerSource, {
      eval: true,
      workerData: {
        shard: shard.buffer,
        shardOffset: shard.byteOffset,
        shardLength: shard.length,
        unsharded: unsharded.buffer,
        unshardedOffset: unsharded.byteOffset,
        unshardedLength: unsharded.length,
      },
    });
    const message = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('worker did not answer within 10 s')), 10_000);
      worker.once('message', (data) => {
        clearTimeout(timer);
        resolve(data);
      });
      worker.once('error', reject);
    });
    await worker.terminate();
    expect(message).toBe('done');
    // Rank 1 holds w[4..6) and the bias; the worker multiplied them in place.
    expect(weight.data.toArray()).toEqual([50, 60]);
    expect(bias.data.toArray()).toEqual([70, 80]);
    handle.useUnshardedViews();
    expect(weight.data.toArray()).toEqual([100, 101, 102, 103, 104, 105]);
    expect(bias.data.toArray()).toEqual([106, 107]);
  });
});
