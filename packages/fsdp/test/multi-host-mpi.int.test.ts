/**
 * The mpi backend across two network-namespace "hosts" (10.234.0.1 and 10.234.0.2, hostnames
 * mpi-n1 and mpi-n2): one `mpirun -np 4` on host 0 starts 2 ranks on each host, host 1's through
 * a launch agent that enters its namespaces (support/mpirun-hosts.ts). Every rank runs the
 * conformance suite's core ops and 5 steps of FSDP full-shard training, checked against the
 * single-process reference. Needs root and Open MPI (.ci/run installs openmpi-bin and
 * libopenmpi-dev); without them the test fails saying so.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tinyConfig, trainReference } from './fixtures/training-run';
import { createNamespacePair, type NamespacePair } from './multi-host-netns';
import { BATCH_PER_RANK, type MultiHostReport, SEQ_LEN } from './multi-host-report';
import { mpirunOnHosts } from './support/mpirun-hosts';
import { expectClose, expectParameters } from './support/parity-checks';

const rankScript = fileURLToPath(new URL('./multi-host-rank.ts', import.meta.url));
const hostnames = ['mpi-n1', 'mpi-n2'] as const;

let pair: NamespacePair | undefined;
let pairError: unknown;
const scratch = mkdtempSync(join(tmpdir(), 'fsdp-multi-host-mpi-'));

function hosts(): NamespacePair {
  if (pair === undefined) throw pairError;
  return pair;
}

/** Bytes host 1's veth end has received so far. */
function bytesReceivedByHostOne(namespaces: NamespacePair): number {
  const links = JSON.parse(
    execFileSync('ip', ['-n', namespaces.namespaces[1], '-s', '-j', 'link', 'show', 'type', 'veth'], {
      encoding: 'utf8',
    }),
  ) as { stats64: { rx: { bytes: number } } }[];
  return links[0]!.stats64.rx.bytes;
}

beforeAll(() => {
  try {
    execFileSync('mpirun', ['--version'], { stdio: 'ignore' });
  } catch {
    pairError = new Error(
      "`mpirun` is not installed: the multi-host mpi test runs Open MPI. Install Debian's openmpi-bin and libopenmpi-dev (.ci/run does when it runs as root with apt-get).",
    );
    return;
  }
  try {
    pair = createNamespacePair({ stem: 'fsdp-mpi', prefix: '10.234.0', hostnames });
  } catch (error) {
    pairError = error;
  }
});

afterAll(() => {
  // Kills whatever still runs in the namespaces (ranks of a failed run included) and deletes them.
  pair?.remove();
  rmSync(scratch, { recursive: true, force: true });
});

describe(`mpirun across 2 namespace hosts x 2 ranks (${hostnames.join(', ')})`, () => {
  it('the mpi backend: the conformance core ops and FSDP full-shard parity for 5 steps, over the veth link', async () => {
    const namespaces = hosts();
    const output = mkdtempSync(join(scratch, 'reports-'));
    const received = bytesReceivedByHostOne(namespaces);
    const launch = mpirunOnHosts(namespaces, {
      directory: scratch,
      ranksPerHost: 2,
      argv: [
        process.execPath,
        '--conditions=@fsdp-ts/source',
        '--import',
        'tsx',
        rankScript,
        'mpi-parity',
        output,
      ],
      env: { ...process.env, TEST_RESULT_DIR: output },
      limitMs: 240_000,
    });
    const code = await launch.exited;
    expect(code, launch.output()).toBe(0);
    const reports = [0, 1, 2, 3].map(
      (rank) => JSON.parse(readFileSync(join(output, `rank-${rank}.json`), 'utf8')) as MultiHostReport,
    );
    // mpirun placed ranks 0-1 on the first host and 2-3 on the second; every rank is on mpi.
    expect(reports.map((report) => [report.rank, report.backend, report.hostname])).toEqual([
      [0, 'mpi', hostnames[0]],
      [1, 'mpi', hostnames[0]],
      [2, 'mpi', hostnames[1]],
      [3, 'mpi', hostnames[1]],
    ]);
    // The ops' data crossed the link between the hosts (1 MiB cases of every core op, 4 ranks).
    expect(bytesReceivedByHostOne(namespaces) - received).toBeGreaterThan(4 << 20);

    for (const report of reports) {
      expect(report.collectives.length, `rank ${report.rank}`).toBeGreaterThan(100);
      expect(report.collectives.filter((outcome) => outcome.failure !== undefined)).toEqual([]);
    }
    const kinds = new Set(reports[0]!.collectives.map((outcome) => outcome.name.split(' ')[0]));
    expect([...kinds].sort()).toEqual(['allGather', 'allReduce', 'barrier', 'broadcast', 'reduceScatter']);

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
    const results = reports.map((report) => report.training['full-shard']!);
    for (const [rank, result] of results.entries()) {
      result.losses.forEach((loss, step) => {
        expectClose(loss, reference.losses[step]!, `rank ${rank} loss of step ${step}`);
      });
    }
    expectParameters(
      results.map((result) => result.pieces),
      reference,
      'full-shard on mpi',
    );
  }, 280_000);
});
