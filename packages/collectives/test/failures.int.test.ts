import { describe, expect, it } from 'vitest';
import { spawnThreadRanks } from '../src/index.js';
import { runWithLauncher } from './helpers/run-with-launcher.js';

const tcpScript = new URL('./fixtures/tcp-rank.ts', import.meta.url);
const shmFixture = new URL('./fixtures/shm-failure-rank.ts', import.meta.url);

function expectMismatchOutcomes(outcomes: unknown[][], size: number): void {
  expect(outcomes).toHaveLength(size);
  const expectedSum = (size * (size + 1)) / 2;
  for (const [rank, [sizes, ops, after]] of outcomes.entries()) {
    // Same op, different sizes: every rank fails and the message names both ops.
    expect(sizes).toMatchObject({ code: 'mismatch', op: 'allReduce', rank });
    expect((sizes as { message: string }).message).toMatch(
      /8 float32 elements[\s\S]*9 float32 elements|9 float32 elements[\s\S]*8 float32 elements/,
    );
    // Different ops: every rank fails naming broadcast and allReduce.
    expect(ops).toMatchObject({ code: 'mismatch', rank });
    expect((ops as { message: string }).message).toMatch(/broadcast/);
    expect((ops as { message: string }).message).toMatch(/allReduce/);
    // No garbage left behind: a matching op afterwards is exact.
    expect(after).toEqual({ sum: expectedSum });
  }
}

describe('failures', () => {
  it('tcp: mismatched sizes and ops fail on every rank with a mismatch error, and the group recovers', async () => {
    const run = await runWithLauncher(3, tcpScript, ['mismatch'], { timeoutMs: 120_000 });
    expect(run.code, run.output).toBe(0);
    expectMismatchOutcomes(
      [0, 1, 2].map((rank) => run.results.get(rank) as unknown[]),
      3,
    );
  }, 150_000);

  it('tcp: killing one of 3 ranks during a 64 MiB all-reduce fails the others within the timeout, naming op and peer', async () => {
    const run = await runWithLauncher(3, tcpScript, ['kill'], {
      timeoutMs: 120_000,
      env: { TEST_OP_TIMEOUT_MS: '20000' },
    });
    // The launcher reports the dead rank and exits non-zero.
    expect(run.code, run.output).not.toBe(0);
    expect(run.output).toMatch(/rank 1/);
    expect(run.results.has(1)).toBe(false);
    for (const rank of [0, 2]) {
      const result = run.results.get(rank) as {
        code: string;
        op: string;
        rank: number;
        peer: number;
        message: string;
        elapsedMs: number;
      };
      expect(result).toMatchObject({ code: 'peer-lost', op: 'allReduce', rank, peer: 1 });
      expect(result.message).toMatch(/allReduce/);
      expect(result.message).toMatch(/rank 1/);
      expect(result.elapsedMs).toBeLessThan(20_000);
    }
  }, 150_000);

  // [Note: blaming a lost peer]: rank 2 freezes rank 0, kills rank 1, fails and closes its own
  // connections, then thaws rank 0, which finds both peers' connections ended at once.
  it.each([
    ['in its native data phase', [], {}],
    ['on the node:net data path', [], { FSDP_TCP_NATIVE: '0' }],
    ["while it waits for rank 2's header", ['headers'], {}],
  ])(
    'tcp: a survivor that closes after a loss is never blamed (rank 0 frozen %s)',
    async (_, args, env) => {
      const run = await runWithLauncher(3, tcpScript, ['kill-frozen', ...args], {
        timeoutMs: 60_000,
        env: { TEST_OP_TIMEOUT_MS: '20000', ...env },
      });
      expect(run.code, run.output).not.toBe(0);
      expect(run.results.has(1)).toBe(false);
      for (const rank of [0, 2]) {
        const result = run.results.get(rank) as { message: string; elapsedMs: number };
        expect(result, run.output).toMatchObject({ code: 'peer-lost', op: 'allReduce', rank, peer: 1 });
        expect(result.message).toMatch(/rank 1/);
        expect(result.elapsedMs).toBeLessThan(20_000);
      }
    },
    90_000,
  );

  it('shm: mismatched sizes and ops fail on every rank with a mismatch error, and the group recovers', async () => {
    const outcomes = (await spawnThreadRanks(3, shmFixture, 'mismatchRank', {
      timeoutMs: 120_000,
    })) as unknown[][];
    expectMismatchOutcomes(outcomes, 3);
  }, 150_000);

  it('shm: a mismatch between an op carried inline and ops carried on the ports fails every rank, and later ops are exact', async () => {
    const size = 3;
    const outcomes = (await spawnThreadRanks(size, shmFixture, 'pathMismatchRank', {
      timeoutMs: 120_000,
    })) as unknown[][];
    const sum = (size * (size + 1)) / 2;
    for (const [rank, [smallAgainstLarge, largeSizes, large, small]] of outcomes.entries()) {
      expect(smallAgainstLarge).toMatchObject({ code: 'mismatch', op: 'allReduce', rank });
      expect((smallAgainstLarge as { message: string }).message).toMatch(/4096 float32 elements/);
      expect(largeSizes).toMatchObject({ code: 'mismatch', op: 'allReduce', rank });
      expect((largeSizes as { message: string }).message).toMatch(/4097 float32 elements/);
      expect(large).toEqual({ first: sum, last: sum });
      expect(small).toEqual({ first: sum, last: sum });
    }
  }, 150_000);

  it('shm: a stalled rank makes the others time out within the op timeout, naming the op and the peer', async () => {
    const outcomes = (await spawnThreadRanks(3, shmFixture, 'stallRank', { timeoutMs: 120_000 })) as {
      code: string;
      op: string;
      peer: number;
      elapsedMs: number;
    }[];
    for (const rank of [0, 2]) {
      expect(outcomes[rank]).toMatchObject({ code: 'timeout', op: 'allReduce', rank, peer: 1 });
      expect(outcomes[rank]!.elapsedMs).toBeGreaterThanOrEqual(900);
      expect(outcomes[rank]!.elapsedMs).toBeLessThan(6_000);
    }
  }, 150_000);
});
