/**
 * Process groups (tcp, shm), Work handles, the rendezvous store and fsdp-run.
 *
 * The store's server and client, the socket handshake and the Slurm node-list parser are the
 * package's own (architecture/decisions/2026-12-02-public-surfaces.md).
 *
 * @packageDocumentation
 * @document ../README.md
 * @module @fsdp-ts/collectives
 */

// Start a process group: env:// (fsdp-run, Slurm, torchrun's variables), sub-groups, the timeout.

export {
  DEFAULT_TIMEOUT_MS,
  defaultProcessGroup,
  type InitProcessGroupOptions,
  initProcessGroup,
  newGroup,
} from './init-process-group.js';
export { type FailureAgreement, failureFingerprint, ProcessGroup } from './process-group.js';

// Run collectives on flat typed buffers, and wait for them.

export { type AllocateSharedOptions, allocateShared } from './allocate-shared.js';
export type {
  Backend,
  BroadcastOptions,
  CollectiveBuffer,
  CollectiveDtype,
  CollectiveKind,
  OpOptions,
  ReduceOp,
  ReduceOptions,
  WireOptions,
} from './types.js';
export { Work, type WorkState } from './work.js';

// Start ranks: the fsdp-run command, thread ranks in one process, what the environment says.

export {
  type ProcessEnvironment,
  readEnvironment,
} from './environment/read-environment.js';
export { resolveSocketAddress, type SocketAddressOptions } from './environment/socket-address.js';
export { fsdpRunCommand } from './launcher/fsdp-run-command.js';
export {
  type SpawnThreadRanksOptions,
  spawnThreadRanks,
  type ThreadRankArguments,
} from './spawn-thread-ranks.js';

// Restart an elastic job from inside a rank.

export {
  RESTART_SIGNAL,
  restartRequested,
  restartRequestedLocally,
} from './elastic/restart-request.js';

// Coordinate through the job's key-value store.

export { openRendezvousStore, type RendezvousStore } from './store/open-rendezvous-store.js';
export type { Store, StoreWaitOptions } from './store/store.js';

// Errors.

export { CollectiveError, type CollectiveErrorCode, type CollectiveErrorDetails } from './errors.js';
