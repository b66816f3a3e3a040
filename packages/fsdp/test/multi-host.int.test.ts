/**
 * Multi-host training across two network-namespace "hosts" joined by a veth pair (10.231.0.1 and
 * 10.231.0.2, a private /30 with no other route). Each host runs
 *   fsdp-run --nnodes 2 --node-rank K --master-addr 10.231.0.1 --master-port P --nproc-per-node 2
 * so 4 ranks talk across a real network hop. Needs root (CI runs as root); a machine that forbids
 * namespaces fails these tests with a message saying so, it does not skip them.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { shardingStrategies } from '@fsdp-ts/fsdp';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { tinyConfig, trainReference } from './fixtures/training-run';
import { createNamespacePair, type NamespacePair } from './multi-host-netns';
import { BATCH_PER_RANK, type MultiHostReport, SEQ_LEN } from './multi-host-report';
import { expectClose, expectParameters } from './support/parity-checks';
import { type WatchedLaunch, watchLaunch } from './support/watched-launch';

const launcher = join(
  dirname(createRequire(import.meta.url).resolve('@fsdp-ts/collectives/package.json')),
  'src/bin/fsdp-run.ts',
);
const rankScript = fileURLToPath(new URL('./multi-host-rank.ts', import.meta.url));
const securePatternScript = fileURLToPath(new URL('./fixtures/secure-pattern-rank.ts', import.meta.url));
const hybridAvailable = (shardingStrategies as readonly string[]).includes('hybrid-shard');
const secret = randomBytes(32).toString('hex');
const LAUNCH_TIMEOUT_SECONDS = 60;

let pair: NamespacePair | undefined;
let pairError: unknown;
/** Launchers of the current test; afterEach kills those still running (a failed test's). */
const running: HostLaunch[] = [];

/** The namespaces, or the error that says why this machine could not make them. */
function hosts(): NamespacePair {
  if (pair === undefined) throw pairError;
  return pair;
}

type HostLaunch = WatchedLaunch;

/** `fsdp-run --nnodes 2 --node-rank <host> ...` inside the host's namespace (killed after `limitMs`). */
function launchHost(
  host: 0 | 1,
  port: number,
  args: string[],
  limitMs: number,
  launch: { script?: string; nprocPerNode?: number; launcherArgs?: string[] } = {},
): HostLaunch {
  const { namespaces, addresses } = hosts();
  const child = spawn(
    'ip',
    [
      'netns',
      'exec',
      namespaces[host],
      process.execPath,
      '--conditions=@fsdp-ts/source',
      '--import',
      'tsx',
      launcher,
      ...['--nnodes', '2', '--node-rank', String(host), '--nproc-per-node', String(launch.nprocPerNode ?? 2)],
      ...['--master-addr', addresses[0], '--master-port', String(port)],
      ...['--timeout', String(LAUNCH_TIMEOUT_SECONDS), '--grace-period', '2'],
      ...(launch.launcherArgs ?? []),
      launch.script ?? rankScript,
      ...args,
    ],
    { env: { ...process.env, FSDP_JOB_SECRET: secret }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const started = watchLaunch(child, limitMs, { name: `host ${host}'s fsdp-run`, match: 'stdout' });
  running.push(started);
  return started;
}

/** Bytes received by host 0's veth end so far. */
function bytesReceivedByHostZero(): number {
  const { namespaces } = hosts();
  const links = JSON.parse(
    execFileSync('ip', ['-n', namespaces[0], '-s', '-j', 'link', 'show', 'type', 'veth'], {
      encoding: 'utf8',
    }),
  ) as { stats64: { rx: { bytes: number } } }[];
  return links[0]!.stats64.rx.bytes;
}

beforeAll(() => {
  try {
    pair = createNamespacePair({ stem: 'fsdp-mh', prefix: '10.231.0' });
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
  // Kills whatever still runs in the namespaces (workers of a killed launcher included) and deletes them.
  pair?.remove();
});

describe('fsdp-run on 2 namespace hosts x 2 processes (veth 10.231.0.1 <-> 10.231.0.2)', () => {
  it(`collectives subset, data sockets on each host's address, FSDP full-shard${hybridAvailable ? ' and hybrid-shard' : ''} parity for 5 steps`, async () => {
    const { addresses } = hosts();
    const output = mkdtempSync(join(tmpdir(), 'fsdp-multi-host-'));
    const received = bytesReceivedByHostZero();
    const args = ['parity', output, hybridAvailable ? 'yes' : 'no'];
    const launches = [launchHost(0, 29500, args, 240_000), launchHost(1, 29500, args, 240_000)];
    const codes = await Promise.all(launches.map((launch) => launch.exited));
    const log = launches.map((launch) => launch.stdout() + launch.stderr()).join('\n');
    expect(codes, log).toEqual([0, 0]);

    const reports = [0, 1, 2, 3].map(
      (rank) => JSON.parse(readFileSync(join(output, `rank-${rank}.json`), 'utf8')) as MultiHostReport,
    );
    rmSync(output, { recursive: true, force: true });
    // Ranks K*2 + local rank. Every TCP socket of a host, listening or connected, is bound to
    // that host's own address (no wildcard, no loopback), and each host has connections to the other.
    const addressOf = (endpoint: string) => endpoint.slice(0, endpoint.lastIndexOf(':'));
    for (const report of reports) {
      const host = Math.floor(report.rank / 2);
      for (const socket of report.sockets) {
        expect(addressOf(socket.local), `rank ${report.rank}: ${JSON.stringify(socket)}`).toBe(
          addresses[host],
        );
      }
      const crossing = report.sockets.filter(
        (socket) => socket.state === 'established' && addressOf(socket.remote) === addresses[1 - host],
      );
      expect(crossing.length, `rank ${report.rank}: no connection to the other host`).toBeGreaterThan(0);
    }
    // Host 0's store (port 29500) listens on the master address.
    expect(reports[0]!.sockets).toContainEqual({
      state: 'listen',
      local: `${addresses[0]}:29500`,
      remote: '0.0.0.0:0',
    });
    // The traffic crossed the veth link (the subset alone moves several MiB each way).
    expect(bytesReceivedByHostZero() - received).toBeGreaterThan(4 << 20);

    const outcomes = reports.flatMap((report) => report.collectives);
    expect(outcomes).toHaveLength(4 * 6);
    expect(outcomes.filter((outcome) => outcome.failure !== undefined)).toEqual([]);

    const reference = await trainReference({
      config: tinyConfig,
      strategy: 'full-shard',
      flattenParameters: true,
      steps: 5,
      batch: BATCH_PER_RANK,
      seqLen: SEQ_LEN,
      worldSize: 4,
      backend: 'cpu',
    });
    expect(reference.losses.at(-1)!).toBeLessThan(reference.losses[0]!);
    const strategies = hybridAvailable
      ? (['full-shard', 'hybrid-shard'] as const)
      : (['full-shard'] as const);
    for (const strategy of strategies) {
      const results = reports.map((report) => report.training[strategy]!);
      for (const [rank, result] of results.entries()) {
        expect(result, `rank ${rank} has no ${strategy} result`).toBeDefined();
        result.losses.forEach((loss, step) => {
          expectClose(loss, reference.losses[step]!, `${strategy} rank ${rank} loss of step ${step}`);
        });
      }
      if (strategy === 'full-shard') {
        expectParameters(
          results.map((result) => result.pieces),
          reference,
          strategy,
        );
      } else {
        // Sharded inside a host, replicated across hosts: each host holds the whole model.
        expectParameters([results[0]!.pieces, results[1]!.pieces], reference, `${strategy} host 0`);
        expectParameters([results[2]!.pieces, results[3]!.pieces], reference, `${strategy} host 1`);
      }
    }
  }, 280_000);

  it("SIGKILL of host 1's launcher mid-training: host 0 fails naming ranks 2 and 3, nothing is left running", async () => {
    const { pids } = hosts();
    const launches = [launchHost(0, 29501, ['endless'], 180_000), launchHost(1, 29501, ['endless'], 180_000)];
    await launches[1]!.waitFor([/\[rank 2\] STEP 1\n/, /\[rank 3\] STEP 1\n/]);
    await launches[0]!.waitFor([/\[rank 0\] STEP 1\n/, /\[rank 1\] STEP 1\n/]);
    const killedAt = Date.now();
    launches[1]!.child.kill('SIGKILL');
    const code = await launches[0]!.exited;
    const elapsedMs = Date.now() - killedAt;
    const log = launches[0]!.stdout() + launches[0]!.stderr();
    expect(code, log).toBe(1);
    expect(elapsedMs, log).toBeLessThan(LAUNCH_TIMEOUT_SECONDS * 1_000);
    expect(launches[0]!.stderr()).toMatch(/job failed: .*node 1.*ranks 2-3/);
    await launches[1]!.exited;
    // Host 1's workers notice their launcher is gone (parent watchdog); host 0's were stopped.
    const deadline = Date.now() + 15_000;
    while ((pids(0).length > 0 || pids(1).length > 0) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect({ host0: pids(0), host1: pids(1) }).toEqual({ host0: [], host1: [] });
  }, 200_000);

  it('--secure: a capture on the veth link holds no plaintext of an all-reduced pattern; without it, it does', async () => {
    const stem = `fsdp-ts plaintext pattern ${randomBytes(4).toString('hex')}, rank `;
    const seen: Record<string, { patterns: boolean[]; capturedBytes: number }> = {};
    for (const [mode, launcherArgs] of [
      ['plain', []],
      ['secure', ['--secure']],
    ] as const) {
      const capture = await startCapture();
      const launch = { script: securePatternScript, nprocPerNode: 1, launcherArgs: [...launcherArgs] };
      const port = mode === 'plain' ? 29502 : 29503;
      const launches = [
        launchHost(0, port, [stem], 60_000, launch),
        launchHost(1, port, [stem], 60_000, launch),
      ];
      const codes = await Promise.all(launches.map((each) => each.exited));
      const log = launches.map((each) => each.stdout() + each.stderr()).join('\n');
      const packets = await capture.stop();
      expect(codes, log).toEqual([0, 0]);
      // The all-reduce was right in both modes, and each mode ran as asked.
      for (const [host, each] of launches.entries()) {
        expect(each.stdout(), log).toContain(
          `[rank ${host}] RESULT ${JSON.stringify({ rank: host, secure: mode === 'secure', correct: true })}`,
        );
      }
      seen[mode] = {
        patterns: [0, 1].map((rank) => packets.includes(Buffer.from(`${stem}${rank}|`, 'latin1'))),
        capturedBytes: packets.length,
      };
    }
    // Both captures saw the 1 MiB payloads cross the link; only the plain one can read them.
    expect(seen.plain!.capturedBytes).toBeGreaterThan(1 << 20);
    expect(seen.secure!.capturedBytes).toBeGreaterThan(1 << 20);
    expect(seen.plain!.patterns).toEqual([true, true]);
    expect(seen.secure!.patterns).toEqual([false, false]);
  }, 150_000);
});

/**
 * tcpdump on host 0's veth end, writing every TCP packet whole to a file; resolves once it
 * listens. `stop()` ends it (SIGINT) and returns the capture file's bytes.
 */
async function startCapture(): Promise<{ stop(): Promise<Buffer> }> {
  const { namespaces, links } = hosts();
  const directory = mkdtempSync(join(tmpdir(), 'fsdp-capture-'));
  const file = join(directory, 'veth.pcap');
  const child = spawn(
    'ip',
    [
      'netns',
      'exec',
      namespaces[0],
      'tcpdump',
      '-i',
      links[0],
      '-U',
      '-s',
      '0',
      '-B',
      '16384',
      '-w',
      file,
      'tcp',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
  await new Promise<void>((resolve, reject) => {
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      if (/listening on/.test(stderr)) resolve();
    });
    child.once('error', (error) =>
      reject(new Error(`cannot run tcpdump (.ci/run installs it with apt-get): ${error.message}`)),
    );
    void exited.then((code) =>
      reject(
        new Error(
          `tcpdump exited with ${code} before listening (.ci/run installs it with apt-get):\n${stderr}`,
        ),
      ),
    );
  });
  return {
    async stop() {
      child.kill('SIGINT');
      await exited;
      const bytes = readFileSync(file);
      rmSync(directory, { recursive: true, force: true });
      return bytes;
    },
  };
}
