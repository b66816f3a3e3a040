/**
 * A real two-node Slurm cluster on the two network-namespace hosts of `multi-host-netns.ts`:
 * munged and slurmctld on host 0, one slurmd per host, each host a Slurm node named after its
 * hostname. Slurm's own binaries from Debian's `slurmctld slurmd slurm-client munge` (.ci/run
 * installs them); nothing is mocked. Needs root, as the namespaces do.
 *
 *   host 0: munged, slurmctld, slurmd -N <hostname 0>   (NodeAddr = host 0's address)
 *   host 1:                    slurmd -N <hostname 1>   (NodeAddr = host 1's address)
 *
 * Every file (munge key and socket, slurm.conf, state, spool, logs) is under one directory, so
 * clusters of concurrent test runs never meet: their namespaces, addresses and ports differ too.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type NamespacePair, onHost } from '../multi-host-netns';

/** The Debian packages the cluster needs; the error for a missing binary names them. */
export const SLURM_PACKAGES = 'slurmctld slurmd slurm-client munge';

export interface SlurmCluster {
  /** slurm.conf's path; client commands find it through SLURM_CONF. */
  readonly configFile: string;
  /** The cluster's only partition (its default). */
  readonly partition: string;
  /** The Slurm node names, host 0 then host 1 (the hosts' hostnames). */
  readonly nodes: readonly [string, string];
  /** The environment a client command (sbatch, srun, scontrol) needs: `base` plus SLURM_CONF. */
  clientEnvironment(base?: NodeJS.ProcessEnv): NodeJS.ProcessEnv;
  /** Runs a client command on host 0 (where slurmctld listens) and returns its stdout. */
  client(argv: string[]): string;
  /** `sbatch` of `script` from `directory`, resolving once the job has ended (bounded by `limitMs`). */
  submit(script: string, options: SubmitOptions): Promise<SubmittedJob>;
  /** A daemon's log file (`slurmctld`, `slurmd-<node>`, `munged`), or '' when it has none yet. */
  log(daemon: string): string;
  /** Stops every daemon (SIGTERM, then SIGKILL after 5 s) and the munge daemon. Idempotent. */
  stop(): Promise<void>;
}

export interface SubmitOptions {
  /** The submit directory (`$SLURM_SUBMIT_DIR`): relative paths of the script land here. */
  directory: string;
  /** The submitting shell's environment; sbatch exports it to the job (`--export=ALL`). */
  environment: NodeJS.ProcessEnv;
  /** The job is cancelled and the promise rejects after this long. */
  limitMs: number;
}

export interface SubmittedJob {
  id: string;
  /** `scontrol show job`'s fields after the end (MinJobAge keeps the record an hour). */
  state: string;
  /** `<exit code>:<signal>` of the batch script. */
  exitCode: string;
  /** The job's wall time as Slurm counted it, in seconds. */
  runTimeSeconds: number;
  /** The batch host and the allocated nodes (`NodeList`, expanded). */
  batchHost: string;
  nodes: string[];
  /** sbatch's own output (the job id). */
  sbatchOutput: string;
}

interface Daemon {
  name: string;
  child: ChildProcess;
  exited: Promise<number | null>;
  output(): string;
}

function commandMissing(name: string): Error {
  return new Error(
    `\`${name}\` is not installed: the Slurm test runs a real Slurm cluster. Install Debian's ${SLURM_PACKAGES} (.ci/run does when it runs as root with apt-get).`,
  );
}

function requireCommands(): void {
  for (const command of ['munged', 'slurmctld', 'slurmd', 'sbatch', 'scontrol', 'nsenter']) {
    const found = ['/usr/sbin', '/usr/bin', '/sbin', '/bin'].some((directory) =>
      existsSync(join(directory, command)),
    );
    if (!found) throw commandMissing(command);
  }
}

function slurmConfig(
  directory: string,
  pair: NamespacePair,
  nodes: readonly [string, string],
  partition: string,
): string {
  const [first, second] = pair.addresses;
  // [Note: slurm.conf of the namespace cluster]
  // - SlurmctldHost is host 0's hostname with its address: slurmctld checks that its own
  //   hostname is this name, and every daemon and client connects to the address.
  // - %n in SlurmdSpoolDir, SlurmdPidFile, SlurmdLogFile and TmpFS gives each slurmd its own
  //   files although both run on one file system. TmpFS is where the PMIx plugin of
  //   `srun --mpi=pmix` makes each node's client directory (/tmp for both would collide).
  // - proctrack/linuxproc and task/none: no cgroup plugins (the namespaces share the machine's
  //   cgroups, and the hosts are not real machines to confine).
  // - MinJobAge keeps a finished job's record, so `scontrol show job` reports its end state
  //   without an accounting database.
  return `${[
    'ClusterName=fsdp-test',
    `SlurmctldHost=${nodes[0]}(${first})`,
    'SlurmUser=root',
    'AuthType=auth/munge',
    'CredType=cred/munge',
    `AuthInfo=socket=${join(directory, 'munge', 'munge.socket')}`,
    `StateSaveLocation=${join(directory, 'state')}`,
    `SlurmdSpoolDir=${join(directory, 'spool-%n')}`,
    `TmpFS=${join(directory, 'tmp-%n')}`,
    `SlurmctldPidFile=${join(directory, 'slurmctld.pid')}`,
    `SlurmdPidFile=${join(directory, 'slurmd-%n.pid')}`,
    `SlurmctldLogFile=${join(directory, 'log', 'slurmctld.log')}`,
    `SlurmdLogFile=${join(directory, 'log', 'slurmd-%n.log')}`,
    'ProctrackType=proctrack/linuxproc',
    'TaskPlugin=task/none',
    'SelectType=select/cons_tres',
    'SelectTypeParameters=CR_CPU',
    'ReturnToService=2',
    'MinJobAge=3600',
    'SlurmdTimeout=60',
    // Both nodes are the same 2-core machine; each offers its 2 CPUs.
    `NodeName=${nodes[0]} NodeAddr=${first} CPUs=2 State=UNKNOWN`,
    `NodeName=${nodes[1]} NodeAddr=${second} CPUs=2 State=UNKNOWN`,
    `PartitionName=${partition} Nodes=${nodes.join(',')} Default=YES MaxTime=INFINITE State=UP`,
  ].join('\n')}\n`;
}

/** `Key=Value` fields of one `scontrol show ... -o` line. */
export function scontrolFields(line: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const match of line.trim().matchAll(/(\S+?)=(\S*)/g)) fields[match[1]!] = match[2]!;
  return fields;
}

/** Job states after which nothing of the job runs any more (COMPLETING is not one). */
const ENDED_STATES = new Set([
  'COMPLETED',
  'FAILED',
  'CANCELLED',
  'TIMEOUT',
  'NODE_FAIL',
  'OUT_OF_MEMORY',
  'PREEMPTED',
  'BOOT_FAIL',
  'DEADLINE',
]);

/** Slurm's `[days-]hours:minutes:seconds` in seconds. */
function durationSeconds(text: string): number {
  const [days, clock] = text.includes('-') ? text.split('-') : ['0', text];
  const parts = clock!.split(':').map(Number);
  while (parts.length < 3) parts.unshift(0);
  const [hours, minutes, seconds] = parts as [number, number, number];
  return Number(days) * 86_400 + hours * 3_600 + minutes * 60 + seconds;
}

/**
 * Starts the cluster on `pair` (made with hostnames: they become the node names) under
 * `directory`, and resolves once both nodes are idle (bounded by `limitMs`). On failure it
 * stops what it started and rejects with the daemons' output and logs.
 */
export async function startSlurmCluster(
  pair: NamespacePair,
  {
    directory,
    partition = 'fsdp',
    limitMs = 60_000,
  }: { directory: string; partition?: string; limitMs?: number },
): Promise<SlurmCluster> {
  requireCommands();
  const nodes = pair.hostnames;
  if (nodes === undefined) throw new Error('startSlurmCluster needs a namespace pair made with hostnames');
  const mungeDirectory = join(directory, 'munge');
  for (const path of [mungeDirectory, join(directory, 'state'), join(directory, 'log')])
    mkdirSync(path, { recursive: true });
  for (const node of nodes) mkdirSync(join(directory, `tmp-${node}`), { recursive: true });
  chmodSync(mungeDirectory, 0o700);
  const keyFile = join(mungeDirectory, 'munge.key');
  writeFileSync(keyFile, randomBytes(128), { mode: 0o400 });
  const configFile = join(directory, 'slurm.conf');
  writeFileSync(configFile, slurmConfig(directory, pair, nodes, partition));

  const logFile = (daemon: string) => join(directory, daemon === 'munged' ? 'munge' : 'log', `${daemon}.log`);
  const log = (daemon: string) => (existsSync(logFile(daemon)) ? readFileSync(logFile(daemon), 'utf8') : '');
  const mungePidFile = join(mungeDirectory, 'munged.pid');
  // munged forks into the background once its socket accepts requests, so it is ready when this
  // returns. --force: it runs as root and its directories sit under the world-writable /tmp.
  // It runs on host 0 (its Unix socket is a file: every host's daemons reach it).
  const [mungeCommand, mungeArgs] = onHost(pair, 0, [
    'munged',
    '--force',
    `--socket=${join(mungeDirectory, 'munge.socket')}`,
    `--key-file=${keyFile}`,
    `--log-file=${logFile('munged')}`,
    `--pid-file=${mungePidFile}`,
    `--seed-file=${join(mungeDirectory, 'munged.seed')}`,
  ]);
  try {
    execFileSync(mungeCommand, mungeArgs, { stdio: ['ignore', 'pipe', 'pipe'], timeout: 30_000 });
  } catch (cause) {
    const stderr = (cause as { stderr?: Buffer }).stderr?.toString() ?? String(cause);
    throw new Error(`munged did not start:\n${stderr}\n${log('munged')}`);
  }

  const daemons: Daemon[] = [];
  const startDaemon = (name: string, host: 0 | 1, argv: string[]) => {
    const [command, args] = onHost(pair, host, argv);
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
    daemons.push({ name, child, exited, output: () => output });
  };
  // -D: in the foreground, so the test owns the processes and sees an early exit.
  startDaemon('slurmctld', 0, ['slurmctld', '-D', '-f', configFile]);
  startDaemon(`slurmd-${nodes[0]}`, 0, ['slurmd', '-D', '-f', configFile, '-N', nodes[0]]);
  startDaemon(`slurmd-${nodes[1]}`, 1, ['slurmd', '-D', '-f', configFile, '-N', nodes[1]]);

  const clientEnvironment = (base: NodeJS.ProcessEnv = process.env) => ({ ...base, SLURM_CONF: configFile });
  const client = (argv: string[]) => {
    const [command, args] = onHost(pair, 0, argv);
    return execFileSync(command, args, {
      encoding: 'utf8',
      env: clientEnvironment(),
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 30_000,
    });
  };
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    for (const daemon of daemons) if (daemon.child.exitCode === null) daemon.child.kill('SIGTERM');
    const killer = setTimeout(() => {
      for (const daemon of daemons) if (daemon.child.exitCode === null) daemon.child.kill('SIGKILL');
    }, 5_000);
    await Promise.all(daemons.map((daemon) => daemon.exited));
    clearTimeout(killer);
    if (existsSync(mungePidFile)) {
      try {
        process.kill(Number(readFileSync(mungePidFile, 'utf8').trim()), 'SIGTERM');
      } catch {
        // already gone
      }
    }
  };
  const describeDaemons = () =>
    [
      ...daemons.map((daemon) => `--- ${daemon.name} (exit ${daemon.child.exitCode}):\n${daemon.output()}`),
      ...['slurmctld', ...nodes.map((node) => `slurmd-${node}`)].map(
        (daemon) => `--- ${daemon}.log:\n${log(daemon).split('\n').slice(-30).join('\n')}`,
      ),
    ].join('\n');

  // Ready when slurmctld answers and lists both nodes idle (each slurmd registered).
  const deadline = Date.now() + limitMs;
  let states = '';
  for (;;) {
    const early = daemons.find(
      (daemon) => daemon.child.exitCode !== null || daemon.child.signalCode !== null,
    );
    if (early !== undefined) {
      await stop();
      throw new Error(`${early.name} exited while the Slurm cluster started:\n${describeDaemons()}`);
    }
    try {
      states = client(['sinfo', '--noheader', '--Node', '--format=%N %T']);
    } catch (error) {
      states = String((error as { stderr?: string }).stderr ?? error);
    }
    const idle = nodes.every((node) => new RegExp(`^${node} idle$`, 'm').test(states));
    if (idle) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(
        `The Slurm cluster's nodes were not idle within ${limitMs / 1000} s (sinfo: ${states.trim()}):\n${describeDaemons()}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }

  const submit = async (
    script: string,
    { directory: submitDirectory, environment, limitMs: jobLimitMs }: SubmitOptions,
  ) => {
    const [command, args] = onHost(pair, 0, ['sbatch', '--parsable', script]);
    let sbatchOutput: string;
    try {
      sbatchOutput = execFileSync(command, args, {
        cwd: submitDirectory,
        encoding: 'utf8',
        env: clientEnvironment(environment),
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 30_000,
      });
    } catch (cause) {
      const stderr = (cause as { stderr?: string }).stderr ?? String(cause);
      throw new Error(`sbatch refused ${script}:\n${stderr}\n${describeDaemons()}`);
    }
    const jobId = /^(\d+)/m.exec(sbatchOutput)?.[1];
    if (jobId === undefined)
      throw new Error(`sbatch printed no job id:\n${sbatchOutput}\n${describeDaemons()}`);
    // [Note: polling the job] `sbatch --wait` polls the job after 2, 10, 42, 74... s, so a
    // 10-second job returned after 42 s; this asks slurmctld every 250 ms until the job has
    // ended and left COMPLETING (its processes are gone), bounded by `limitMs`.
    const deadline = Date.now() + jobLimitMs;
    let fields: Record<string, string>;
    for (;;) {
      fields = scontrolFields(client(['scontrol', 'show', 'job', '--oneliner', jobId]));
      if (ENDED_STATES.has(fields.JobState ?? '')) break;
      if (Date.now() > deadline) {
        client(['scancel', jobId]);
        throw new Error(
          `job ${jobId} did not end within ${jobLimitMs / 1000} s (cancelled; state ${fields.JobState}):\n${describeDaemons()}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const nodeList = fields.NodeList ?? '';
    return {
      id: jobId,
      state: fields.JobState ?? '',
      exitCode: fields.ExitCode ?? '',
      runTimeSeconds: durationSeconds(fields.RunTime ?? '0:0'),
      batchHost: fields.BatchHost ?? '',
      nodes: client(['scontrol', 'show', 'hostnames', nodeList]).trim().split('\n'),
      sbatchOutput,
    };
  };

  return { configFile, partition, nodes, clientEnvironment, client, submit, log, stop };
}
