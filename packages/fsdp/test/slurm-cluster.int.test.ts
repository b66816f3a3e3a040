/**
 * docs/deploy/slurm/train-gpt.sbatch (fsdp-run, tcp) and train-gpt-mpi.sbatch (srun --mpi=pmix,
 * the mpi backend) submitted to a real two-node Slurm cluster: munged,
 * slurmctld and one slurmd per network-namespace host (10.233.0.1 and 10.233.0.2, hostnames
 * slurm-n1 and slurm-n2; see support/slurm-cluster.ts). Each script is copied with only the edits
 * their headers document (the partition line, the checkout path) and submitted with `sbatch`
 * from a scratch directory, as a user would. Needs root and Debian's slurmctld, slurmd,
 * slurm-client and munge, and Open MPI for the second (.ci/run installs them); without them the
 * test fails saying so.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNamespacePair, type NamespacePair } from './multi-host-netns';
import { type SlurmCluster, startSlurmCluster } from './support/slurm-cluster';

const checkout = fileURLToPath(new URL('../../..', import.meta.url)).replace(/\/$/, '');
const sbatchScript = join(checkout, 'docs/deploy/slurm/train-gpt.sbatch');
const mpiSbatchScript = join(checkout, 'docs/deploy/slurm/train-gpt-mpi.sbatch');
const hostnames = ['slurm-n1', 'slurm-n2'] as const;
/** Few steps keep the jobs short; the loss falls well within them (2.58 at step 1, 1.69 at step 25). */
const TRAIN_STEPS = 25;
const JOB_LIMIT_MS = 150_000;

let pair: NamespacePair | undefined;
let cluster: SlurmCluster | undefined;
let setupError: unknown;
const scratch = mkdtempSync(join(tmpdir(), 'fsdp-slurm-'));

/** The cluster, or the error that says why this machine could not start it. */
function running(): { pair: NamespacePair; cluster: SlurmCluster } {
  if (pair === undefined || cluster === undefined) throw setupError;
  return { pair, cluster };
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

/**
 * The sbatch script as a user adapts a copy: only the lines its header marks "Edit:". Fails
 * when a marked line is gone, so the test and the documented edits stay the same.
 */
function editedCopy(source: string, partition: string, directory: string): string {
  const text = readFileSync(source, 'utf8');
  const edits: [string, string][] = [
    ['##SBATCH --partition=<partition>', `#SBATCH --partition=${partition}`],
    ['checkout="$SLURM_SUBMIT_DIR"', `checkout=${checkout}`],
  ];
  let edited = text;
  for (const [line, replacement] of edits) {
    expect(text.split('\n'), `${source} lost its documented edit line ${line}`).toContain(line);
    edited = edited.replace(line, replacement);
  }
  const copy = join(directory, basename(source));
  writeFileSync(copy, edited, { mode: 0o755 });
  return copy;
}

/** The `@@train-gpt {...}` messages rank 0 printed (`--progress lines`), in order. */
function trainMessages(log: string): { kind: string; [field: string]: unknown }[] {
  return [...log.matchAll(/@@train-gpt (\{.*\})$/gm)].map((match) => JSON.parse(match[1]!));
}

beforeAll(async () => {
  try {
    pair = createNamespacePair({ stem: 'fsdp-sl', prefix: '10.233.0', hostnames });
    cluster = await startSlurmCluster(pair, { directory: join(scratch, 'cluster') });
  } catch (error) {
    setupError = error;
  }
});

afterAll(async () => {
  await cluster?.stop();
  // Kills whatever still runs in the namespaces (job steps of a failed test included) and deletes them.
  pair?.remove();
  rmSync(scratch, { recursive: true, force: true });
});

/** Submits an edited copy of `source` and returns the job and its log (the script's --output file). */
async function submitCopy(source: string, logName: string) {
  const { pair: hosts, cluster: slurm } = running();
  const submitDirectory = mkdtempSync(join(scratch, 'submit-'));
  const script = editedCopy(source, slurm.partition, submitDirectory);
  const received = bytesReceivedByHostOne(hosts);
  const job = await slurm.submit(script, {
    directory: submitDirectory,
    // HOME: the tcp script's job secret goes to $HOME/.fsdp (a shared home on a cluster).
    environment: { ...process.env, HOME: submitDirectory, TRAIN_STEPS: String(TRAIN_STEPS) },
    limitMs: JOB_LIMIT_MS,
  });
  const logFile = join(submitDirectory, `${logName}-${job.id}.log`);
  const log = existsSync(logFile) ? readFileSync(logFile, 'utf8') : `(no ${logFile})`;
  const context = `job ${job.id} (${job.state}, exit ${job.exitCode}, ${job.runTimeSeconds} s):\n${job.sbatchOutput}\n${log}`;
  return {
    hosts,
    job,
    log,
    context,
    submitDirectory,
    crossedBytes: () => bytesReceivedByHostOne(hosts) - received,
  };
}

/**
 * What both scripts must show: Slurm's COMPLETED with exit 0 on both nodes, the traffic crossed
 * the veth link, 4 ranks on `backend` trained TRAIN_STEPS steps, the loss fell, the outputs exist.
 */
function expectTrained(
  run: Awaited<ReturnType<typeof submitCopy>>,
  backend: string,
): { firstLoss: number; finalLoss: number } {
  const { job, log, context, submitDirectory } = run;
  expect({ state: job.state, exitCode: job.exitCode }, context).toEqual({
    state: 'COMPLETED',
    exitCode: '0:0',
  });
  expect({ batchHost: job.batchHost, nodes: job.nodes }, context).toEqual({
    batchHost: hostnames[0],
    nodes: [...hostnames],
  });
  // The training crossed the veth link between the hosts (gathers and reduce-scatters of 4 ranks).
  expect(run.crossedBytes(), context).toBeGreaterThan(1 << 20);
  const messages = trainMessages(log);
  const start = messages.find((message) => message.kind === 'start');
  expect(start, context).toMatchObject({
    worldSize: 4,
    totalSteps: TRAIN_STEPS,
    collectivesBackend: backend,
  });
  expect(
    messages.filter((message) => message.kind === 'step'),
    context,
  ).toHaveLength(TRAIN_STEPS);
  const done = messages.find((message) => message.kind === 'done') as
    | { summary: { firstLoss: number; finalLoss: number } }
    | undefined;
  expect(done, context).toBeDefined();
  const { firstLoss, finalLoss } = done!.summary;
  expect(finalLoss, `loss ${firstLoss} -> ${finalLoss} in ${job.runTimeSeconds} s`).toBeLessThan(
    0.8 * firstLoss,
  );
  expect(existsSync(join(submitDirectory, `output-${job.id}`, 'metrics.json')), context).toBe(true);
  return { firstLoss, finalLoss };
}

const line = (text: string) => new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`, 'm');

describe(`a real Slurm cluster on 2 namespace hosts (${hostnames.join(', ')})`, () => {
  it('docs/deploy/slurm/train-gpt.sbatch (fsdp-run, tcp), copied with its documented edits: COMPLETED, ranks 0-1 on the first node and 2-3 on the second, the loss falls', async () => {
    const run = await submitCopy(sbatchScript, 'train-gpt');
    expectTrained(run, 'tcp');
    const { log, context, hosts, job, submitDirectory } = run;
    // Each node announced itself from its own host (its hostname), and task 1's launcher, on the
    // second node, joined the store on the first node's address.
    expect(log, context).toMatch(line(`0: ${hostnames[0]} (${hostnames[0]}): node 0 of 2, ranks 0-1`));
    expect(log, context).toMatch(line(`1: ${hostnames[1]} (${hostnames[1]}): node 1 of 2, ranks 2-3`));
    expect(log, context).toContain(
      `1: fsdp-run[node 1]: joining the store of node 0 at ${hosts.addresses[0]}:29500.`,
    );
    // The job secret file was removed by the script's trap.
    expect(existsSync(join(submitDirectory, '.fsdp', `secret-${job.id}`))).toBe(false);
  });

  it('docs/deploy/slurm/train-gpt-mpi.sbatch (srun --mpi=pmix, mpi backend), copied with its documented edits: COMPLETED, ranks 0-1 on the first node and 2-3 on the second, the loss falls', async () => {
    const run = await submitCopy(mpiSbatchScript, 'train-gpt-mpi');
    expectTrained(run, 'mpi');
    const { log, context } = run;
    for (const rank of [0, 1, 2, 3]) {
      const host = hostnames[rank < 2 ? 0 : 1];
      expect(log, context).toMatch(line(`${rank}: ${host} (${host}): rank ${rank} of 4`));
    }
    // No launcher of ours ran: srun started every rank.
    expect(log, context).not.toContain('fsdp-run');
  });
});
