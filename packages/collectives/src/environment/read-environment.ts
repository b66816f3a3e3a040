import { resolveJobSecret } from '../auth/job-secret.js';
import { CollectiveError } from '../errors.js';
import { expandSlurmNodelist } from './slurm-nodelist.js';

/** What a worker learns from its environment (the torchrun contract, or Slurm's). */
export interface ProcessEnvironment {
  rank: number;
  worldSize: number;
  localRank: number;
  localWorldSize: number;
  /** Which host (launcher) of the job this is, 0-based. */
  nodeRank: number;
  masterAddr: string;
  masterPort: number;
  /** The job secret (FSDP_JOB_SECRET or FSDP_JOB_SECRET_FILE). */
  secret: string;
  /** Which attempt of the job this is under `fsdp-run --max-restarts` (FSDP_RESTART_COUNT), from 0. */
  restartCount: number;
  /** Prefix for every store key of this attempt (FSDP_STORE_PREFIX; fsdp-run sets `attempt-N/`). */
  storePrefix: string;
  /** FSDP_SOCKET_IFNAME, if set: the interface data sockets bind to. */
  socketIfname: string | undefined;
  /** FSDP_SOCKET_ADDR, if set: the address data sockets bind to. */
  socketAddr: string | undefined;
  /**
   * True when a launcher (fsdp-run, FSDP_AGENT_STORE=1) already runs the store on
   * MASTER_ADDR:MASTER_PORT: then rank 0 must only connect to it, not start its own.
   */
  agentStore: boolean;
  /** FSDP_TIMEOUT_MS, if set (fsdp-run passes its --timeout): a default for store and op timeouts. */
  timeoutMs: number | undefined;
  /** Where rank and size came from. */
  source: 'torchrun' | 'slurm';
}

/** Port used under Slurm when MASTER_PORT is absent: 20000 + SLURM_JOB_ID mod 10000. */
export function slurmDefaultMasterPort(jobId: number): number {
  return 20_000 + (jobId % 10_000);
}

/**
 * Reads and validates the environment contract (see "Environment contract" in the README):
 * RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, falling back to
 * SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE / SLURM_TASKS_PER_NODE,
 * SLURM_NODEID and the first host of SLURM_JOB_NODELIST; and the job secret. Throws a
 * CollectiveError (code 'invalid-argument' or 'auth') naming the variable and how to fix it.
 */
export function readEnvironment(env: NodeJS.ProcessEnv = process.env): ProcessEnvironment {
  const slurm = isSet(env.SLURM_PROCID) && !isSet(env.RANK);
  const rank = integer(env, slurm ? 'SLURM_PROCID' : 'RANK', 0);
  const worldSize = integer(env, slurm ? 'SLURM_NTASKS' : 'WORLD_SIZE', 1);
  if (rank >= worldSize) {
    throw invalid(slurm ? 'SLURM_PROCID' : 'RANK', String(rank), `less than the world size ${worldSize}`);
  }
  const localRankName = isSet(env.LOCAL_RANK)
    ? 'LOCAL_RANK'
    : isSet(env.SLURM_LOCALID)
      ? 'SLURM_LOCALID'
      : undefined;
  const localRank = localRankName === undefined ? 0 : integer(env, localRankName, 0);
  const localWorldSize = readLocalWorldSize(env, localRankName === undefined);
  if (localRank >= localWorldSize) {
    throw invalid(
      localRankName ?? 'LOCAL_RANK',
      String(localRank),
      `less than LOCAL_WORLD_SIZE ${localWorldSize}`,
    );
  }
  const nodeRankName = ['FSDP_NODE_RANK', 'GROUP_RANK', 'SLURM_NODEID'].find((name) => isSet(env[name]));
  const nodeRank =
    nodeRankName === undefined ? Math.floor(rank / localWorldSize) : integer(env, nodeRankName, 0);
  const masterAddr = readMasterAddr(env, worldSize);
  const masterPort = readMasterPort(env, worldSize);
  const secret = resolveJobSecret(env);
  if (secret === undefined) {
    throw new CollectiveError('No job secret: neither FSDP_JOB_SECRET nor FSDP_JOB_SECRET_FILE is set.', {
      code: 'auth',
      fix: 'start the job with fsdp-run (it creates one), or give every process the same secret, e.g. `export FSDP_JOB_SECRET=$(openssl rand -hex 32)` before srun, or a Kubernetes Secret mounted as FSDP_JOB_SECRET_FILE.',
    });
  }
  return {
    rank,
    worldSize,
    localRank,
    localWorldSize,
    nodeRank,
    masterAddr,
    masterPort,
    secret,
    restartCount: isSet(env.FSDP_RESTART_COUNT) ? integer(env, 'FSDP_RESTART_COUNT', 0) : 0,
    storePrefix: env.FSDP_STORE_PREFIX ?? '',
    socketIfname: nonEmpty(env.FSDP_SOCKET_IFNAME),
    socketAddr: nonEmpty(env.FSDP_SOCKET_ADDR),
    agentStore: env.FSDP_AGENT_STORE === '1',
    timeoutMs: isSet(env.FSDP_TIMEOUT_MS) ? integer(env, 'FSDP_TIMEOUT_MS', 1) : undefined,
    source: slurm ? 'slurm' : 'torchrun',
  };
}

function readLocalWorldSize(env: NodeJS.ProcessEnv, noLocalRank: boolean): number {
  if (isSet(env.LOCAL_WORLD_SIZE)) return integer(env, 'LOCAL_WORLD_SIZE', 1);
  if (isSet(env.SLURM_NTASKS_PER_NODE)) return integer(env, 'SLURM_NTASKS_PER_NODE', 1);
  if (isSet(env.SLURM_TASKS_PER_NODE)) {
    const counts = expandTasksPerNode(env.SLURM_TASKS_PER_NODE!);
    const node = isSet(env.SLURM_NODEID) ? integer(env, 'SLURM_NODEID', 0) : 0;
    const count = counts[node];
    if (count === undefined) {
      throw invalid(
        'SLURM_NODEID',
        env.SLURM_NODEID!,
        `below the ${counts.length} nodes of SLURM_TASKS_PER_NODE`,
      );
    }
    return count;
  }
  if (noLocalRank) return 1;
  throw new CollectiveError('LOCAL_RANK is set but LOCAL_WORLD_SIZE is not.', {
    code: 'invalid-argument',
    fix: 'set LOCAL_WORLD_SIZE to the number of processes on this host (fsdp-run and torchrun set both).',
  });
}

/**
 * [Note: SLURM_TASKS_PER_NODE] '2(x3),1' means 2 tasks on each of the first 3 nodes, then 1:
 * expands to [2, 2, 2, 1], indexed by SLURM_NODEID.
 */
function expandTasksPerNode(value: string): number[] {
  const counts: number[] = [];
  for (const part of value.split(',')) {
    const match = /^(\d+)(?:\(x(\d+)\))?$/.exec(part.trim());
    if (match === null || Number(match[1]) < 1 || Number(match[2] ?? 1) > 1_000_000) {
      throw invalid('SLURM_TASKS_PER_NODE', value, "Slurm's form like '2(x3),1'");
    }
    for (let repeat = 0; repeat < Number(match[2] ?? 1); repeat++) counts.push(Number(match[1]));
  }
  return counts;
}

function readMasterAddr(env: NodeJS.ProcessEnv, worldSize: number): string {
  if (isSet(env.MASTER_ADDR)) return env.MASTER_ADDR!.trim();
  const nodelist = env.SLURM_JOB_NODELIST ?? env.SLURM_NODELIST;
  if (isSet(nodelist)) return expandSlurmNodelist(nodelist!)[0]!;
  if (worldSize === 1) return '127.0.0.1';
  throw new CollectiveError('MASTER_ADDR is not set (and no SLURM_JOB_NODELIST to take it from).', {
    code: 'invalid-argument',
    fix: 'set MASTER_ADDR to the host of rank 0 (its name or address), or start the job with fsdp-run.',
  });
}

function readMasterPort(env: NodeJS.ProcessEnv, worldSize: number): number {
  if (isSet(env.MASTER_PORT)) {
    const port = integer(env, 'MASTER_PORT', 1);
    if (port > 65_535) throw invalid('MASTER_PORT', env.MASTER_PORT!, 'a TCP port from 1 to 65535');
    return port;
  }
  if (isSet(env.SLURM_JOB_ID)) return slurmDefaultMasterPort(integer(env, 'SLURM_JOB_ID', 0));
  if (worldSize === 1) return 29_500;
  throw new CollectiveError('MASTER_PORT is not set.', {
    code: 'invalid-argument',
    fix: 'set MASTER_PORT to a free TCP port on the MASTER_ADDR host (e.g. 29500), or start the job with fsdp-run.',
  });
}

/**
 * `name`'s value as an integer >= `minimum`, or undefined when it is not set (or empty); a value
 * that is set but not such an integer throws the same typed error as readEnvironment.
 */
export function readOptionalInteger(
  name: string,
  minimum: number,
  env: NodeJS.ProcessEnv = process.env,
): number | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : integer(env, name, minimum);
}

function integer(env: NodeJS.ProcessEnv, name: string, minimum: number): number {
  const value = env[name];
  if (value === undefined || value.trim() === '') {
    throw new CollectiveError(`${name} is not set.`, {
      code: 'invalid-argument',
      fix: `set ${name} (fsdp-run, torchrun-compatible operators and srun set it), or start the job with fsdp-run.`,
    });
  }
  const text = value.trim();
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text)) || Number(text) < minimum) {
    throw invalid(name, value, `an integer >= ${minimum}`);
  }
  return Number(text);
}

function invalid(name: string, value: string, expected: string): CollectiveError {
  return new CollectiveError(`${name}='${value}' is malformed; expected ${expected}.`, {
    code: 'invalid-argument',
    expected,
    actual: value,
    fix: `correct ${name} in the environment of this process.`,
  });
}

function isSet(value: string | undefined): boolean {
  return value !== undefined && value.trim() !== '';
}

function nonEmpty(value: string | undefined): string | undefined {
  return isSet(value) ? value : undefined;
}
