import { readOptionalInteger } from './environment/read-environment.js';
import { CollectiveError } from './errors.js';
import type { GroupIdentity, OwnedResource } from './internal/backend-definition.js';
import { findBackend } from './internal/backend-registry.js';
import { checkInitProcessGroupOptions } from './internal/check-option-keys.js';
import { noticeNoLauncher } from './internal/no-launcher-notice.js';
import { threadRankContext } from './internal/shm/thread-rank-context.js';
import { mpiLaunched, mpiLaunchedRank } from './mpi/mpi-backend.js';
import { ProcessGroup } from './process-group.js';
import type { Store } from './store/store.js';
import type { Backend } from './types.js';

/** Options of initProcessGroup: backend, rank, size, store, job secret, host, secure transport, timeout. */
export interface InitProcessGroupOptions {
  /**
   * Default: `shm` inside threads started by spawnThreadRanks, `mpi` in a process started by
   * mpirun/mpiexec or `srun --mpi=pmix` (without RANK set), `tcp` otherwise.
   */
  backend?: Backend;
  /** Default: from the environment (RANK) or the thread rank. */
  rank?: number;
  /** Default: from the environment (WORLD_SIZE) or the number of thread ranks. */
  size?: number;
  /** tcp: the rendezvous store; default: a client of MASTER_ADDR:MASTER_PORT. */
  store?: Store;
  /** tcp: the job secret the data sockets authenticate with; default FSDP_JOB_SECRET(_FILE). */
  secret?: string;
  /** tcp: address this rank's data sockets listen on and peers connect to; default 127.0.0.1. */
  host?: string;
  /**
   * tcp: encrypt and authenticate every data byte (TLS 1.2 with a key derived from the job
   * secret per connection; see README "Secure transport"). Default FSDP_SECURE=1 (set by
   * `fsdp-run --secure`), else off. Every rank of the group must agree.
   */
  secure?: boolean;
  /** Default timeout of rendezvous and of every op, in milliseconds; default 120 000. */
  timeoutMs?: number;
  /** Prefix of the group's store keys; default 'world'. Two jobs sharing a store need distinct names. */
  name?: string;
}

/** The default `timeoutMs` of initProcessGroup, in milliseconds (two minutes). */
export const DEFAULT_TIMEOUT_MS = 120_000;

let defaultGroup: ProcessGroup | undefined;

/**
 * Creates the world process group of this rank and makes it the default group. Every rank of the
 * job calls it; it resolves once all ranks are connected.
 */
export async function initProcessGroup(options: InitProcessGroupOptions = {}): Promise<ProcessGroup> {
  checkInitProcessGroupOptions(options);
  const thread = threadRankContext();
  noticeNoLauncher(options, thread !== undefined);
  const backend = options.backend ?? (thread !== undefined ? 'shm' : mpiLaunched() ? 'mpi' : 'tcp');
  // The mpi backend takes rank and size from MPI_COMM_WORLD; the launcher's variables say the same.
  const launchedByMpi = backend === 'mpi' ? mpiLaunchedRank() : undefined;
  const rank =
    options.rank ??
    thread?.rank ??
    launchedByMpi?.rank ??
    readOptionalInteger('RANK', 0) ??
    readOptionalInteger('SLURM_PROCID', 0) ??
    0;
  const size =
    options.size ??
    thread?.size ??
    launchedByMpi?.size ??
    readOptionalInteger('WORLD_SIZE', 1) ??
    readOptionalInteger('SLURM_NTASKS', 1) ??
    1;
  if (!Number.isInteger(size) || size < 1 || !Number.isInteger(rank) || rank < 0 || rank >= size) {
    throw new CollectiveError(`initProcessGroup: rank ${rank} of size ${size} is not a valid rank.`, {
      code: 'invalid-argument',
      rank,
      expected: `0 <= rank < size, size >= 1`,
      actual: { rank, size },
      fix: 'set RANK and WORLD_SIZE (fsdp-run does), or pass { rank, size }.',
    });
  }
  const definition = findBackend(backend, rank);
  const identity: GroupIdentity = {
    backend,
    rank,
    size,
    key: options.name ?? 'world',
    worldRanks: Array.from({ length: size }, (_, index) => index),
    timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
  };
  const owned: OwnedResource[] = [];
  try {
    const config = await definition.configure(options, identity, owned);
    const setup = { ...identity, config };
    const group = new ProcessGroup(setup, definition, await definition.start(setup), owned);
    defaultGroup = group;
    return group;
  } catch (error) {
    for (const resource of owned.reverse()) await resource.close().catch(() => undefined);
    throw error;
  }
}

/** The group the last initProcessGroup call of this thread created. */
export function defaultProcessGroup(): ProcessGroup {
  if (defaultGroup === undefined) {
    throw new CollectiveError('No process group: initProcessGroup() has not been called on this thread.', {
      code: 'invalid-argument',
      fix: 'await initProcessGroup() first.',
    });
  }
  return defaultGroup;
}

/** `defaultProcessGroup().newGroup(ranks)`: a sub-group of world ranks (see ProcessGroup.newGroup). */
export function newGroup(ranks: readonly number[]): Promise<ProcessGroup> {
  return defaultProcessGroup().newGroup(ranks);
}
