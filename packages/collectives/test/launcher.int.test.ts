import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import {
  alive,
  bundleLauncher,
  fixture,
  freePort,
  type Launch,
  launch,
  linesOf,
  survivorsAfter,
} from './launcher-harness.js';
import { temporaryDirectory } from './support/fixtures.js';

const SECRET = 'launcher-test-shared-secret-0123456789';

// The tests start dozens of node processes concurrently on a 2-core machine shared with other
// jobs: under a load average of 30 one launch can take 20 s, hence the generous bound.
vi.setConfig({ testTimeout: 150_000 });

beforeAll(async () => {
  await bundleLauncher();
});

function pidDirectory(): string {
  return temporaryDirectory('fsdp-run-test-');
}

function workerPids(directory: string): number[] {
  return readdirSync(directory).map((name) => Number(readFileSync(join(directory, name), 'utf8')));
}

// [Note: concurrent launcher tests] Each test starts its own launchers, ports and pid directory,
// and most of its time is spent waiting (grace periods, heartbeats, process start-up), so the
// tests run concurrently; assertions use only their own launch's output.
describe.concurrent('fsdp-run', () => {
  it('--help shows each default as the value a user would type', async () => {
    for (const [env, nodes] of [
      [{}, '1'],
      [{ SLURM_NNODES: '3' }, '3'],
    ] as const) {
      const job = launch(['--help'], env);
      expect((await job.exited).code, job.stderr()).toBe(0);
      const help = job.stdout().replace(/\s+/g, ' ');
      expect(help).toContain(
        `--nnodes <m> nodes (hosts) in the job: N, or MIN:MAX for an elastic job (default: ${nodes})`,
      );
      expect(help).not.toMatch(/[{}]/);
    }
  });

  it('runs a .ts script on 3 ranks with the env contract, its store, and rank-prefixed whole lines', async () => {
    // From source, as `npm test` and workspace users run it (the other tests use the bundle).
    const job = launch(['--nproc-per-node', '3', fixture('launcher-rendezvous.ts')], {}, true);
    const { code } = await job.exited;
    expect(code, job.stderr()).toBe(0);
    const stdout = linesOf(job.stdout());
    for (const rank of [0, 1, 2]) {
      expect(stdout).toContain(
        `[rank ${rank}] rank=${rank} world=3 local=${rank}/3 node=0 agentStore=true secretLength=64 arrived<=true`,
      );
      expect(stdout).toContain(`[rank ${rank}] piece-one piece-two piece-three`);
      expect(linesOf(job.stderr())).toContain(`[rank ${rank}] stderr of rank ${rank}`);
    }
    expect(stdout).toContain('[rank 0] rogue client refused: true');
    for (const line of stdout) expect(line).toMatch(/^\[rank [0-2]\] /);
  });

  // 'stubborn': rank 1 exits with code 3 and rank 0 ignores SIGTERM, so stopping it needs SIGKILL.
  it.each([
    ['stubborn', 'rank 1 (local rank 1) exited with code 3'],
    ['fail-signal', 'rank 1 (local rank 1) was killed by signal SIGKILL'],
    // Rank 0 leaves behind a process that ignores SIGTERM: it must not survive the job.
    ['grandchild', 'rank 1 (local rank 1) exited with code 3'],
  ])('fails when a worker fails (%s), names it, and leaves no worker running', async (mode, message) => {
    const directory = pidDirectory();
    const job = launch([
      '--nproc-per-node',
      '3',
      '--grace-period',
      '0.5',
      fixture('launcher-worker.js'),
      directory,
      mode,
    ]);
    const { code } = await job.exited;
    expect(code).toBe(1);
    expect(job.stderr()).toContain(`fsdp-run: job failed: ${message} on node 0`);
    const pids = workerPids(directory);
    expect(pids).toHaveLength(mode === 'grandchild' ? 4 : 3);
    expect(pids.filter(alive)).toEqual([]);
  });

  it.each([
    ['SIGTERM', 143],
    ['SIGINT', 130],
    ['SIGHUP', 129],
  ] as const)('forwards %s to the workers and exits %i once they are gone', async (signal, exitCode) => {
    const directory = pidDirectory();
    const job = launch(['--nproc-per-node', '2', fixture('launcher-worker.js'), directory, 'idle']);
    await job.waitForOutput(/ready \d/, 2);
    job.child.kill(signal);
    const { code } = await job.exited;
    expect(code).toBe(exitCode);
    expect(linesOf(job.stdout())).toEqual(
      expect.arrayContaining([`[rank 0] got ${signal}`, `[rank 1] got ${signal}`]),
    );
    expect(workerPids(directory).filter(alive)).toEqual([]);
  });

  it('leaves no orphan when the launcher itself is SIGKILLed (workers watch their parent)', async () => {
    const directory = pidDirectory();
    const job = launch(['--nproc-per-node', '2', fixture('launcher-worker.js'), directory, 'idle']);
    await job.waitForOutput(/ready \d/, 2);
    job.child.kill('SIGKILL');
    await job.exited;
    const pids = workerPids(directory);
    expect(pids).toHaveLength(2);
    expect(await survivorsAfter(pids, 10_000)).toEqual([]);
  });

  it('passes a flood of output through whole, prefixed and in order', async () => {
    const job = launch(['--nproc-per-node', '2', fixture('launcher-worker.js'), pidDirectory(), 'flood']);
    const { code } = await job.exited;
    expect(code, job.stderr()).toBe(0);
    const flood = linesOf(job.stdout()).filter((line) => line.includes('flood'));
    expect(flood).toHaveLength(20_000);
    flood.forEach((line, index) => {
      expect(line).toBe(`[rank 0] flood ${index} ${'x'.repeat(index % 97)}`);
    });
  });

  it('restarts the whole group with --max-restarts and then succeeds', async () => {
    const directory = pidDirectory();
    const job = launch([
      '--nproc-per-node',
      '2',
      '--max-restarts',
      '2',
      fixture('launcher-worker.js'),
      directory,
      'restart',
    ]);
    const { code } = await job.exited;
    expect(code, job.stderr()).toBe(0);
    const stdout = linesOf(job.stdout());
    expect(stdout).toEqual(
      expect.arrayContaining([
        '[rank 0] ready 0 attempt 0',
        '[rank 1] ready 1 attempt 0',
        '[rank 0] ready 0 attempt 1',
        '[rank 1] ready 1 attempt 1',
      ]),
    );
    expect(stdout.some((line) => line.includes('attempt 2'))).toBe(false);
    expect(job.stderr()).toContain('restarting the group (restart 1 of 2)');
    expect(workerPids(directory).filter(alive)).toEqual([]);
  });

  describe('with two nodes on loopback', () => {
    function node(rank: number, port: number, script: string[], extra: string[] = []): Launch {
      const where = ['--nnodes', '2', '--node-rank', String(rank), '--master-addr', '127.0.0.1'];
      const how = [
        '--master-port',
        String(port),
        '--nproc-per-node',
        '2',
        '--timeout',
        '30',
        '--grace-period',
        '1',
      ];
      return launch([...where, ...how, ...extra, ...script], { FSDP_JOB_SECRET: SECRET });
    }

    it('numbers ranks K×N + local rank across launchers that share one store', async () => {
      const port = await freePort();
      const launches = [0, 1].map((rank) => node(rank, port, [fixture('launcher-rendezvous.ts')]));
      const results = await Promise.all(launches.map((each) => each.exited));
      expect(
        results.map((result) => result.code),
        launches.map((each) => each.stderr()).join('\n'),
      ).toEqual([0, 0]);
      for (const rank of [0, 1, 2, 3]) {
        const local = rank % 2;
        const nodeRank = Math.floor(rank / 2);
        expect(linesOf(launches[nodeRank]!.stdout())).toContain(
          `[rank ${rank}] rank=${rank} world=4 local=${local}/2 node=${nodeRank} agentStore=true secretLength=${SECRET.length} arrived<=true`,
        );
      }
    });

    it('fails every launcher when a worker on another node fails', async () => {
      const port = await freePort();
      const directory = pidDirectory();
      const launches = [0, 1].map((rank) =>
        node(rank, port, [fixture('launcher-worker.js'), directory, 'fail-last']),
      );
      const results = await Promise.all(launches.map((each) => each.exited));
      expect(results.map((result) => result.code)).toEqual([1, 1]);
      for (const each of launches) {
        expect(each.stderr()).toContain('job failed: rank 3 (local rank 1) exited with code 4 on node 1');
      }
      expect(workerPids(directory).filter(alive)).toEqual([]);
    });

    it('fails node 0, without restarting, when the launcher of node 1 is SIGKILLed; no worker survives', async () => {
      const port = await freePort();
      const directory = pidDirectory();
      const script = [fixture('launcher-worker.js'), directory, 'idle'];
      const launches = [0, 1].map((rank) => node(rank, port, script, ['--max-restarts', '2']));
      await Promise.all([
        launches[0]!.waitForOutput(/ready \d/, 2),
        launches[1]!.waitForOutput(/ready \d/, 2),
      ]);
      launches[1]!.child.kill('SIGKILL');
      const result = await launches[0]!.exited;
      expect(result.code).toBe(1);
      expect(launches[0]!.stderr()).toContain('job failed: lost the launcher of node 1');
      expect(launches[0]!.stdout()).not.toContain('attempt 1');
      expect(await survivorsAfter(workerPids(directory), 10_000)).toEqual([]);
    });

    it('fails node 1 when node 0 (and its store) is SIGKILLed; no worker survives', async () => {
      const port = await freePort();
      const directory = pidDirectory();
      const launches = [0, 1].map((rank) =>
        node(rank, port, [fixture('launcher-worker.js'), directory, 'idle']),
      );
      await Promise.all([
        launches[0]!.waitForOutput(/ready \d/, 2),
        launches[1]!.waitForOutput(/ready \d/, 2),
      ]);
      launches[0]!.child.kill('SIGKILL');
      const result = await launches[1]!.exited;
      expect(result.code).toBe(1);
      expect(launches[1]!.stderr()).toContain(`job failed: lost the store on node 0 at 127.0.0.1:${port}`);
      expect(await survivorsAfter(workerPids(directory), 10_000)).toEqual([]);
    });

    it('fails node 1 within the timeout when node 0 stalls (SIGSTOP) without closing its connections', async () => {
      const port = await freePort();
      const directory = pidDirectory();
      const script = [fixture('launcher-worker.js'), directory, 'idle'];
      const launches = [0, 1].map((rank) => node(rank, port, script, ['--timeout', '4']));
      await Promise.all([
        launches[0]!.waitForOutput(/ready \d/, 2),
        launches[1]!.waitForOutput(/ready \d/, 2),
      ]);
      launches[0]!.child.kill('SIGSTOP');
      const stalledAt = Date.now();
      const result = await launches[1]!.exited;
      const detectedAfterMs = Date.now() - stalledAt;
      launches[0]!.child.kill('SIGKILL');
      expect(result.code).toBe(1);
      expect(launches[1]!.stderr()).toContain('did not answer check in 4000 ms');
      // A ping every timeout / 2 = 2 s, answered within 4 s: detected within about 6 s.
      expect(detectedAfterMs).toBeLessThan(12_000);
      expect(await survivorsAfter(workerPids(directory), 10_000)).toEqual([]);
    });

    it('stops at once when interrupted while waiting for a node 0 that never comes', async () => {
      const port = await freePort();
      const job = node(
        1,
        port,
        [fixture('launcher-worker.js'), pidDirectory(), 'idle'],
        ['--timeout', '120'],
      );
      await job.waitForOutput(/joining the store of node 0/, 1, 'stderr');
      const interruptedAt = Date.now();
      job.child.kill('SIGINT');
      const { code } = await job.exited;
      expect(code).toBe(130);
      expect(Date.now() - interruptedAt).toBeLessThan(10_000);
      expect(job.stderr()).toContain('Interrupted by SIGINT while connecting to the store');
    });
  });
});
