import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { attributeProfile, describeAttribution } from './profile-attribution';

const directory = mkdtempSync(join(tmpdir(), 'profile-attribution-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

/** A V8 .cpuprofile: a call tree and one sample per millisecond at the given leaves. */
function writeProfile(leaves: number[]): string {
  const frame = (id: number, functionName: string, url: string, children: number[] = []) => ({
    id,
    callFrame: { functionName, url, lineNumber: 0, columnNumber: 0, scriptId: '0' },
    children,
  });
  const nodes = [
    frame(1, '(root)', '', [2, 3, 4, 5]),
    frame(2, 'step', 'file:///repo/packages/fsdp/bench/training-rank.ts', [6, 7, 8, 9, 11, 13, 15, 16]),
    frame(3, '(garbage collector)', ''),
    frame(4, '(idle)', ''),
    frame(5, '(program)', ''),
    frame(6, 'matMul', 'file:///repo/node_modules/@tensorflow/tfjs-backend-wasm/dist/index.js'),
    frame(7, 'wait', 'file:///repo/packages/collectives/src/work.ts', [10]),
    frame(8, 'copyIntoBucket', 'file:///repo/packages/fsdp/src/reduction.ts'),
    frame(9, 'backwardNode', 'file:///repo/packages/tensor/src/autograd.ts'),
    // A wasm function called from inside a wait (a spin): still waiting.
    frame(10, 'convert', 'wasm://wasm/abc'),
    // Native leaves count where their nearest frame with a source file is.
    frame(11, 'compute', 'file:///repo/packages/nn/src/internal/linear-blas-kernel.ts', [12]),
    frame(12, 'openblas_get_num_threads', ''),
    frame(13, 'issue', 'file:///repo/packages/collectives/src/internal/communication-client.ts', [14]),
    frame(14, 'postMessage', 'node:internal/worker/io'),
    frame(15, 'encodeBfloat16', 'file:///repo/packages/kernels/src/reduce/bfloat16.ts'),
    frame(16, 'adamSimdKernel', 'file:///repo/packages/optim/src/internal/kernels/adam-simd-kernel.ts'),
  ];
  const path = join(directory, `profile-${leaves.length}.cpuprofile`);
  writeFileSync(
    path,
    JSON.stringify({
      nodes,
      startTime: 1_000_000,
      endTime: 1_000_000 + leaves.length * 1000,
      samples: leaves,
      timeDeltas: leaves.map(() => 1000),
    }),
  );
  return path;
}

describe('attributeProfile', () => {
  it('puts each sample of a row window into one category and leaves samples outside every window out', () => {
    // ms 1–10: row A's step; 11–20: outside any window; 21–30: row B's step.
    const rowA = [6, 6, 6, 6, 7, 10, 3, 8, 9, 5];
    const between = Array.from({ length: 10 }, () => 6);
    const rowB = [4, 4, 4, 12, 14, 7, 7, 15, 16, 16];
    const path = writeProfile([...rowA, ...between, ...rowB]);
    const phases = (communication: number) => ({
      communication: [communication, communication + 2],
      otherThreads: [1, 1],
      mainRunnable: [3, 5],
    });
    const [a, b] = attributeProfile(path, [
      { windows: [[1_000_500, 1_010_500]], phases: phases(10) },
      { windows: [[1_020_500, 1_030_500]], phases: phases(20) },
    ]);
    const none = {
      kernels: 0,
      bfloat16: 0,
      optimizer: 0,
      fsdp: 0,
      collectives: 0,
      other: 0,
      gc: 0,
      waiting: 0,
      idle: 0,
    };
    expect(a!.mainThreadMs).toEqual({ ...none, kernels: 4, fsdp: 1, other: 2, gc: 1, waiting: 2 });
    expect(b!.mainThreadMs).toEqual({
      ...none,
      idle: 3,
      kernels: 1,
      collectives: 1,
      waiting: 2,
      bfloat16: 1,
      optimizer: 2,
    });
    expect(a!.profiledStepMs).toBe(10);
    expect(a!.communicationThreadCpuMs).toBe(11);
    expect(b!.mainRunnableMs).toBe(4);
    expect(a!.top[0]).toMatchObject({ category: 'kernels', ms: 4 });
    expect(a!.top[0]!.name).toContain('matMul');
    expect(describeAttribution(a!)).toContain('waiting 2');
    // A native leaf is named with its caller.
    expect(b!.top.map((entry) => entry.name)).toContain(
      'openblas_get_num_threads ← compute nn/src/internal/linear-blas-kernel.ts:1',
    );
  });

  it('averages over a row’s steps', () => {
    const path = writeProfile([6, 6, 7, 7, 6, 6, 7, 7]);
    const [row] = attributeProfile(path, [
      {
        windows: [
          [1_000_500, 1_004_500],
          [1_004_500, 1_008_500],
        ],
        phases: { communication: [], otherThreads: [], mainRunnable: [] },
      },
    ]);
    expect(row!.mainThreadMs.kernels).toBe(2);
    expect(row!.mainThreadMs.waiting).toBe(2);
    expect(row!.profiledStepMs).toBe(4);
  });
});
