/**
 * fsdp-run --nnodes MIN:MAX on loopback (real launcher processes, the bundled bin): a second
 * launcher joins a running job (the workers get the pre-restart request, then every worker
 * restarts at the larger world size), and a launcher with another job secret is refused. The
 * multi-host versions (namespace hosts, training, lost hosts) are in @fsdp-ts/fsdp's
 * elastic.int.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { bundleLauncher, fixture, freePort, type Launch, launch } from './launcher-harness.js';

const secret = randomBytes(32).toString('hex');
const started: Launch[] = [];

beforeAll(async () => {
  await bundleLauncher();
});

afterEach(async () => {
  for (const job of started.splice(0)) {
    if (job.child.exitCode === null && job.child.signalCode === null) job.child.kill('SIGKILL');
    await job.exited;
  }
});

function elastic(port: number, nnodes: string, mode: string, jobSecret = secret, nproc = 2): Launch {
  const args = ['--nnodes', nnodes, '--nproc-per-node', String(nproc), '--master-port', String(port)];
  args.push('--heartbeat-timeout', '3', '--last-call', '0.2', '--grace-period', '2');
  const job = launch([...args, fixture('elastic-worker.js'), mode], { FSDP_JOB_SECRET: jobSecret });
  started.push(job);
  return job;
}

describe('fsdp-run --nnodes 1:2 on loopback', () => {
  it('a launcher that joins stops round 0 after the pre-restart request; round 1 runs 4 ranks', async () => {
    const port = await freePort();
    const first = elastic(port, '1:2', 'grow');
    await first.waitForOutput(/worker \d\/2 round 0/, 2);
    // A launcher with another secret: refused (auth) and logged by the host; the job goes on.
    const intruder = elastic(port, '1:2', 'grow', randomBytes(32).toString('hex'));
    expect((await intruder.exited).code).toBe(1);
    expect(intruder.stderr()).toMatch(/refused this launcher's TLS-PSK handshake.*FSDP_JOB_SECRET/);
    expect(intruder.stdout()).not.toMatch(/worker/);
    const second = elastic(port, '1:2', 'grow');
    const [one, two] = await Promise.all([first.exited, second.exited]);
    const log = `${first.stdout()}${first.stderr()}\n${second.stdout()}${second.stderr()}`;
    expect([one.code, two.code], log).toEqual([0, 0]);
    expect(first.stderr()).toMatch(/rendezvous: refused a launcher: its TLS-PSK handshake failed/);
    // Both round-0 workers saw the request (file or SIGUSR2 flag) before round 1 started.
    expect(first.stdout()).toMatch(/\[rank 0\] checkpoint 0/);
    expect(first.stdout()).toMatch(/\[rank 1\] checkpoint 1/);
    expect(
      first
        .stdout()
        .match(/worker \d\/4 round 1 local \d/g)
        ?.sort(),
    ).toEqual(['worker 0/4 round 1 local 0', 'worker 1/4 round 1 local 1']);
    expect(
      second
        .stdout()
        .match(/worker \d\/4 round 1 local \d/g)
        ?.sort(),
    ).toEqual(['worker 2/4 round 1 local 0', 'worker 3/4 round 1 local 1']);
    expect(first.stderr()).toMatch(/round 0 stops \(join\)/);
    expect(first.stderr()).toMatch(/round 1: node 0 of 2, world size 4, ranks 0-1, restarts 0 of 0\./);
    expect(second.stderr()).toMatch(/round 1: node 1 of 2, world size 4, ranks 2-3/);
    expect(first.stderr()).toMatch(/job finished/);
  });

  it('a one-process launcher names its rank in the singular', async () => {
    const job = elastic(await freePort(), '1:1', 'exit', secret, 1);
    const { code } = await job.exited;
    expect(code, job.stderr()).toBe(0);
    expect(job.stderr()).toMatch(/round 0: node 0 of 1, world size 1, rank 0, restarts 0 of 0\./);
    expect(job.stderr()).not.toMatch(/ranks 0-0/);
  });

  it('reports a failure every worker shares once, with the fix naming the script line ([Note: one report per job])', async () => {
    const job = elastic(await freePort(), '1:1', 'throw');
    const { code } = await job.exited;
    expect(code, job.stderr()).toBe(1);
    const lines = job.stderr().split('\n');
    const failures = lines.filter((line) => line.includes(': failure on '));
    expect(failures, job.stderr()).toEqual([
      "fsdp-run[elastic]: failure on ranks 0-1: TypeError: Cannot read properties of undefined (reading 'width')",
    ]);
    expect(job.stderr()).toMatch(
      /^fsdp-run\[elastic\]: {3}Fix: .*elastic-worker\.js:\d+:\d+ \(the top frame/m,
    );
    expect(job.stderr()).toMatch(
      /^fsdp-run\[elastic\]: {3}stacks: \/\S+\/round-0\/rank-0\.log, \S+\/round-0\/rank-1\.log /m,
    );
    expect(job.stderr()).not.toMatch(/^\[rank \d\]\s+at /m);
  });
});
