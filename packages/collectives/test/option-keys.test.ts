import { describe, expect, it } from 'vitest';
import { allocateShared, CollectiveError, initProcessGroup, spawnThreadRanks } from '../src/index.js';

async function rejection(promise: Promise<unknown>): Promise<CollectiveError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof CollectiveError) return error;
    throw error;
  }
  throw new Error('expected a CollectiveError, the promise resolved');
}

function thrown(action: () => unknown): CollectiveError {
  try {
    action();
  } catch (error) {
    if (error instanceof CollectiveError) return error;
    throw error;
  }
  throw new Error('expected a CollectiveError, nothing was thrown');
}

describe('collectives options reject unknown keys', () => {
  it("initProcessGroup names the nearest key and PyTorch's init_process_group names", async () => {
    const typo = await rejection(initProcessGroup({ backend: 'shm', timeoutMS: 1000 } as never));
    expect(typo.code).toBe('unknown-option');
    expect(typo.message).toContain(
      "initProcessGroup got an unknown option: 'timeoutMS' (did you mean 'timeoutMs'?)",
    );
    const pytorch = await rejection(
      initProcessGroup({ backend: 'shm', world_size: 1, init_method: 'env://' } as never),
    );
    expect(pytorch.message).toContain("PyTorch's world_size is size here");
    expect(pytorch.message).toContain("'init_method' (no such option");
    expect(
      (await rejection(initProcessGroup({ backend: 'shm', rnk: undefined } as never))).message,
    ).toContain("did you mean 'rank'?");
  });

  it('spawnThreadRanks rejects before starting any thread', async () => {
    const error = await rejection(
      spawnThreadRanks(2, new URL('./does-not-exist.ts', import.meta.url), 'main', { timeout: 10 } as never),
    );
    expect(error.code).toBe('unknown-option');
    expect(error.message).toContain('timeoutMs here');
  });

  it("op options name the nearest key and torch.distributed's arguments", async () => {
    const group = await initProcessGroup({ backend: 'shm', timeoutMs: 10_000, name: 'option-keys' });
    try {
      const buffer = allocateShared(Float32Array, 2);
      expect(thrown(() => group.allReduce(buffer, { reduceOp: 'max' } as never)).message).toContain(
        "allReduce got an unknown option: 'reduceOp'",
      );
      expect(thrown(() => group.broadcast(buffer, { src: 0 } as never)).message).toContain(
        'src is root here',
      );
      expect(thrown(() => group.barrier({ async_op: true } as never)).message).toContain(
        'returns a Work at once',
      );
      group.allReduce(buffer, { op: 'max', wireDtype: 'float32', timeoutMs: 5000 }).wait();
    } finally {
      await group.destroy();
    }
  });
});
