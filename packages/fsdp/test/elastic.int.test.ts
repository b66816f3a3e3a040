/**
 * Elastic fsdp-run (`--nnodes MIN:MAX`, the zeromq rendezvous) on two network-namespace hosts
 * (veth 10.232.0.1 <-> 10.232.0.2), 2 processes each, training the tiny GPT with checkpoints.
 * Final parameters are compared bitwise with reference runs of fixed-size fsdp-run (loopback)
 * that switch world size at the same step through the same checkpoints. Needs root, like the
 * multi-host test (which it follows); it fails, not skips, where namespaces are forbidden.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fsdpRunArguments } from '../../collectives/test/helpers/rank-commands';
import { createNamespacePair, type NamespacePair } from './multi-host-netns';
import { type WatchedLaunch, watchLaunch } from './support/watched-launch';

const rankScript = fileURLToPath(new URL('./fixtures/elastic-rank.ts', import.meta.url));
const secret = randomBytes(32).toString('hex');
const HEARTBEAT_TIMEOUT_SECONDS = 3;
const work = mkdtempSync(join(tmpdir(), 'fsdp-elastic-'));

let pair: NamespacePair | undefined;
let pairError: unknown;
const running: Launch[] = [];

function hosts(): NamespacePair {
  if (pair === undefined) throw pairError;
  return pair;
}

type Launch = WatchedLaunch;

function start(command: string[], env: NodeJS.ProcessEnv, limitMs: number): Launch {
  const child = spawn(command[0]!, command.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const launch = watchLaunch(child, limitMs, { name: 'fsdp-run', match: 'output' });
  running.push(launch);
  return launch;
}

const node = [process.execPath, ...fsdpRunArguments()];

/** Elastic fsdp-run on namespace host `host`. */
function elastic(host: 0 | 1, port: number, nnodes: string, args: string[], jobSecret = secret): Launch {
  const { namespaces, addresses } = hosts();
  const command = ['ip', 'netns', 'exec', namespaces[host], ...node];
  command.push(
    '--nnodes',
    nnodes,
    '--nproc-per-node',
    '2',
    '--master-addr',
    addresses[0],
    '--master-port',
    String(port),
  );
  command.push(
    '--heartbeat-timeout',
    String(HEARTBEAT_TIMEOUT_SECONDS),
    '--last-call',
    '3',
    '--grace-period',
    '2',
  );
  command.push('--join-timeout', '6', rankScript, ...args);
  return start(command, { ...process.env, FSDP_JOB_SECRET: jobSecret }, 240_000);
}

/** Fixed-size fsdp-run on loopback (the reference). */
function fixed(nproc: number, args: string[]): Launch {
  return start(
    [...node, '--nproc-per-node', String(nproc), '--grace-period', '2', rankScript, ...args],
    process.env,
    240_000,
  );
}

async function succeeded(launch: Launch): Promise<void> {
  expect(await launch.exited, launch.output()).toBe(0);
}

/** A fresh (checkpoint root, output directory). */
function directories(name: string): [string, string] {
  const output = join(work, name, 'output');
  mkdirSync(output, { recursive: true });
  return [join(work, name, 'checkpoints'), output];
}

type RankResult = { startStep: number; worldSize: number; round: number; pieces: unknown };
const results = (output: string, worldSize: number): RankResult[] =>
  Array.from({ length: worldSize }, (_, rank) =>
    JSON.parse(readFileSync(join(output, `rank-${rank}.json`), 'utf8')),
  );

/** Reference: `first` ranks to step `switchAt` (checkpointed), then `second` ranks to `until`. */
async function reference(name: string, first: number, switchAt: number, second: number, until: number) {
  const [root, output] = directories(name);
  await succeeded(fixed(first, [root, output, String(switchAt)]));
  await succeeded(fixed(second, [root, output, String(until)]));
  return results(output, second);
}

beforeAll(() => {
  try {
    pair = createNamespacePair({ stem: 'fsdp-el', prefix: '10.232.0' });
  } catch (error) {
    pairError = error;
  }
});

afterEach(async () => {
  for (const launch of running.splice(0)) {
    if (launch.child.exitCode === null && launch.child.signalCode === null) launch.child.kill('SIGKILL');
    await launch.exited;
  }
});

afterAll(() => {
  pair?.remove();
  rmSync(work, { recursive: true, force: true });
});

async function nothingLeft(): Promise<void> {
  const { pids } = hosts();
  const deadline = Date.now() + 15_000;
  while ((pids(0).length > 0 || pids(1).length > 0) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect({ host0: pids(0), host1: pids(1) }).toEqual({ host0: [], host1: [] });
}

describe('fsdp-run --nnodes MIN:MAX on 2 namespace hosts x 2 processes', () => {
  it("scale down: host 1's launcher SIGKILLed after step 7; host 0 goes on at W=2 from step 5, bitwise equal to W=4 then W=2", async () => {
    const [root, output] = directories('down');
    const expected = reference('down-reference', 4, 5, 2, 10);
    const args = [root, output, '10', '7'];
    const launches = [elastic(1, 29611, '1:2', args), elastic(0, 29611, '1:2', args)];
    const [host1, host0] = launches as [Launch, Launch];
    // Node ranks follow the order of arrival ([Note: rounds]), and both launchers start at once:
    // either host may be node 0 of round 0.
    await host0.waitFor([/round 0: node [01] of 2, world size 4/]);
    await Promise.all(
      [host0, host1].map((host) => host.waitFor([/\[rank [02]\] PAUSED/, /\[rank [13]\] PAUSED/])),
    );
    const killedAt = performance.now();
    host1.child.kill('SIGKILL');
    await host0.waitFor([/round 1: node 0 of 1, world size 2/]);
    const detectedMs = performance.now() - killedAt;
    await succeeded(host0);
    const log = host0.output();
    expect(log).toMatch(
      /rendezvous: lost launcher node [01] \(10\.232\.0\.2 .*ranks (0-1|2-3)\): no heartbeat for 3000 ms/,
    );
    expect(log).toMatch(/\[rank 0\] START step 5 world 2 round 1/);
    // Detection within the heartbeat timeout, plus the --last-call wait (3 s) and slack for this busy machine.
    expect(detectedMs, log).toBeLessThan((HEARTBEAT_TIMEOUT_SECONDS + 3 + 4) * 1_000);
    const elasticResults = results(output, 2);
    const referenceResults = await expected;
    for (const rank of [0, 1]) {
      expect(elasticResults[rank]).toMatchObject({ startStep: 5, worldSize: 2, round: 1 });
      expect(elasticResults[rank]!.pieces, `rank ${rank}`).toEqual(referenceResults[rank]!.pieces);
    }
    await nothingLeft();
  }, 300_000);

  it('scale up: host 1 joins after step 6 (a wrong-key launcher first is refused); checkpoint at 6, W=4 after, bitwise equal to W=2 then W=4', async () => {
    const [root, output] = directories('up');
    const expected = reference('up-reference', 2, 6, 4, 10);
    const args = [root, output, '10', '6'];
    const host0 = elastic(0, 29612, '1:2', args);
    await host0.waitFor([/round 0: node 0 of 1, world size 2/, /\[rank 0\] PAUSED/, /\[rank 1\] PAUSED/]);
    const intruder = elastic(1, 29612, '1:2', args, randomBytes(32).toString('hex'));
    expect(await intruder.exited, intruder.output()).toBe(1);
    expect(intruder.output()).toMatch(/refused this launcher's TLS-PSK handshake/);
    await host0.waitFor([/rendezvous: refused a launcher: its TLS-PSK handshake failed/]);
    const host1 = elastic(1, 29612, '1:2', args);
    await Promise.all([succeeded(host0), succeeded(host1)]);
    const log = host0.output();
    expect(log).toMatch(/round 0 stops \(join\)/);
    expect(log).toMatch(/\[rank 0\] RESTART checkpoint at 6/);
    expect(log).toMatch(/round 1: node 0 of 2, world size 4/);
    const elasticResults = results(output, 4);
    const referenceResults = await expected;
    for (const rank of [0, 1, 2, 3]) {
      expect(elasticResults[rank]).toMatchObject({ startStep: 6, worldSize: 4, round: 1 });
      expect(elasticResults[rank]!.pieces, `rank ${rank}`).toEqual(referenceResults[rank]!.pieces);
    }
    await nothingLeft();
  }, 300_000);

  it('below MIN (--nnodes 2:2): host 1 lost; the job ends within the timeouts naming its node and ranks; nothing left running', async () => {
    const [root, output] = directories('below');
    const args = [root, output, '10', '1'];
    const launches = [elastic(0, 29613, '2:2', args), elastic(1, 29613, '2:2', args)];
    const [host0, host1] = launches as [Launch, Launch];
    // The rendezvous numbers the launchers in the order they join, so host 1 may be node 0 or 1.
    await host1.waitFor([/round 0: node [01] of 2, world size 4/]);
    const node = Number(/round 0: node ([01]) of 2/.exec(host1.output())![1]);
    const [first, second] = [2 * node, 2 * node + 1];
    const [other, otherSecond] = [2 * (1 - node), 2 * (1 - node) + 1];
    await Promise.all([
      host0.waitFor([
        new RegExp(`\\[rank ${other}\\] PAUSED`),
        new RegExp(`\\[rank ${otherSecond}\\] PAUSED`),
      ]),
      host1.waitFor([new RegExp(`\\[rank ${first}\\] PAUSED`), new RegExp(`\\[rank ${second}\\] PAUSED`)]),
    ]);
    const killedAt = performance.now();
    host1.child.kill('SIGKILL');
    const code = await host0.exited;
    const elapsedMs = performance.now() - killedAt;
    const log = host0.output();
    expect(code, log).toBe(1);
    expect(log).toMatch(
      new RegExp(
        `job failed: fewer than 2 launchers \\(--nnodes 2:2\\) for 6 s: .*missing: node ${node} \\(10\\.232\\.0\\.2 .*ranks ${first}-${second}\\), lost in round 0 \\(no heartbeat for 3000 ms\\)`,
      ),
    );
    // Heartbeat timeout (3 s) + join timeout (6 s) + slack for this busy machine.
    expect(elapsedMs, log).toBeLessThan((HEARTBEAT_TIMEOUT_SECONDS + 6 + 6) * 1_000);
    await host1.exited;
    await nothingLeft();
  }, 300_000);
});
