/**
 * [Note: native header exchange]: on the native tcp data path, op headers and eager bytes move
 * through libc; a mismatch must still fail every rank with 'mismatch' and leave the streams
 * aligned, whichever paths the mismatched ops took. Real processes under fsdp-run, W=2 and 3,
 * with FSDP_TCP_NATIVE=1 (a rank fails to start where the native path cannot load).
 */
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { runWithLauncher } from './helpers/run-with-launcher.js';

const tcpScript = new URL('./fixtures/tcp-rank.ts', import.meta.url);

interface NativeMismatchReport {
  errors: { code?: string; op?: string; rank?: number; message: string }[];
  wrong: number;
  smallSum: number;
  headers: { exchanges: number; mismatches: number };
}

function koffiInstalled(): boolean {
  try {
    createRequire(import.meta.url).resolve('koffi');
    return true;
  } catch {
    return false;
  }
}

describe.runIf(process.platform === 'linux' && koffiInstalled())(
  'tcp headers on the native data path',
  () => {
    for (const size of [2, 3]) {
      it(`W=${size}: mismatches found in native header exchanges fail every rank, and exact ops follow`, async () => {
        const run = await runWithLauncher(size, tcpScript, ['mismatch-native'], {
          timeoutMs: 90_000,
          env: { FSDP_TCP_NATIVE: '1', TEST_OP_TIMEOUT_MS: '30000' },
        });
        expect(run.code, run.output).toBe(0);
        for (let rank = 0; rank < size; rank++) {
          const report = run.results.get(rank) as NativeMismatchReport;
          expect(report, run.output).toBeDefined();
          const [sizes, kinds, barrier, paths] = report.errors;
          for (const error of report.errors) expect(error).toMatchObject({ code: 'mismatch', rank });
          expect(sizes!.message).toMatch(
            new RegExp(
              `${300_000 + size} float32 elements[\\s\\S]*300000 float32 elements|300000 float32 elements[\\s\\S]*${300_000 + size} float32 elements`,
            ),
          );
          expect(kinds!.message).toMatch(/reduceScatter/);
          expect(kinds!.message).toMatch(/allReduce/);
          expect(barrier!.message).toMatch(/barrier/);
          expect(paths!.message).toMatch(/16 float32 elements/);
          // The streams stayed aligned: a large all-reduce is exact, then a barrier and a small one.
          expect(report.wrong).toBe(-1);
          expect(report.smallSum).toBe((size * (size + 1)) / 2);
          // Ops 1 and 2 and the exact all-reduce exchanged headers natively everywhere, ops 3 and 4
          // on every rank but 0 (its barrier and small all-reduce use node:net); each of ops 1-4
          // that did found its mismatch there.
          expect(report.headers.exchanges).toBe(rank === 0 ? 3 : 5);
          expect(report.headers.mismatches).toBe(rank === 0 ? 2 : 4);
        }
      }, 120_000);
    }

    it('W=3: a stalled rank makes the others time out while they wait for its header, naming the op and the peer', async () => {
      const run = await runWithLauncher(3, tcpScript, ['stall'], {
        timeoutMs: 90_000,
        env: { FSDP_TCP_NATIVE: '1' },
      });
      for (const rank of [0, 2]) {
        const outcome = run.results.get(rank) as { code: string; elapsedMs: number };
        expect(outcome, run.output).toMatchObject({ code: 'timeout', op: 'allReduce', rank, peer: 1 });
        expect(outcome.elapsedMs).toBeGreaterThanOrEqual(900);
        expect(outcome.elapsedMs).toBeLessThan(6_000);
      }
    }, 120_000);

    it('W=3: a rank that times out on a stalled peer tells the others, who fail naming the stalled rank, not it', async () => {
      const run = await runWithLauncher(3, tcpScript, ['stall-uneven'], {
        timeoutMs: 90_000,
        env: { FSDP_TCP_NATIVE: '1' },
      });
      const first = run.results.get(0) as { code: string; elapsedMs: number };
      expect(first, run.output).toMatchObject({ code: 'timeout', op: 'allReduce', rank: 0, peer: 1 });
      const third = run.results.get(2) as { code: string; elapsedMs: number; message: string };
      // Rank 2's own timeout is 20 s: it learnt of the stall from rank 0, well before.
      expect(third, run.output).toMatchObject({ code: 'timeout', op: 'allReduce', rank: 2, peer: 1 });
      expect(third.message).toMatch(/rank 0 timed out waiting for rank 1/);
      expect(third.elapsedMs).toBeLessThan(10_000);
    }, 120_000);
  },
);
