import { describe, expect, it } from 'vitest';
import { initProcessGroup } from '../src/index.js';
import type { CaseOutcome } from './conformance/run-conformance.js';
import { runWithLauncher } from './helpers/run-with-launcher.js';

interface TamperResult {
  small: number;
  failure: { code: string; message: string } | undefined;
  flipped: boolean | null;
}

describe('secure transport (fsdp-run --secure, TLS on every data connection)', () => {
  it('every op x dtype x size matches the reference on 2 processes', async () => {
    const script = new URL('./fixtures/tcp-rank.ts', import.meta.url);
    const run = await runWithLauncher(2, script, ['conformance'], {
      timeoutMs: 170_000,
      launcherArgs: ['--secure'],
    });
    expect(run.code, run.output).toBe(0);
    const outcomes = [...run.results.values()].flatMap((result) => result as CaseOutcome[]);
    expect(outcomes.filter((outcome) => outcome.failure !== undefined)).toEqual([]);
    expect((run.results.get(0) as CaseOutcome[]).length).toBeGreaterThan(50);
  }, 180_000);

  it('a byte flipped on the wire by a relay fails the receiving rank with auth, and its peer too', async () => {
    const script = new URL('./fixtures/tamper-rank.ts', import.meta.url);
    const run = await runWithLauncher(2, script, [], { timeoutMs: 90_000, launcherArgs: ['--secure'] });
    const [receiver, sender] = [run.results.get(0), run.results.get(1)] as (TamperResult | undefined)[];
    expect(receiver, run.output).toBeDefined();
    expect(sender, run.output).toBeDefined();
    // Before the flip the relay passed everything through: the small all-reduce is right.
    expect([receiver!.small, sender!.small]).toEqual([3, 3]);
    expect(sender!.flipped).toBe(true);
    // Rank 0 received the flipped record: its op fails with 'auth', not a wrong sum or a timeout.
    expect(receiver!.failure, run.output).toMatchObject({
      code: 'auth',
      message: expect.stringMatching(/rank 1 failed authentication/),
    });
    // Rank 1 does not hang: the broken group fails its op too (TLS alert or closed connection).
    expect(['auth', 'peer-lost', 'aborted']).toContain(sender!.failure?.code);
  }, 100_000);

  it('FSDP_SECURE other than 1/true/0/false is refused, saying what is expected', async () => {
    const previous = process.env.FSDP_SECURE;
    process.env.FSDP_SECURE = 'yes';
    try {
      await expect(initProcessGroup({ backend: 'tcp', rank: 0, size: 1 })).rejects.toMatchObject({
        code: 'invalid-argument',
        message: expect.stringMatching(/FSDP_SECURE is 'yes'; expected 1 or 0/),
      });
    } finally {
      if (previous === undefined) delete process.env.FSDP_SECURE;
      else process.env.FSDP_SECURE = previous;
    }
  });
});
