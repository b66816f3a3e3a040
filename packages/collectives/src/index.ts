/**
 * Process groups (tcp, shm), Work handles, the rendezvous store and fsdp-run.
 *
 * @packageDocumentation
 * @document ../README.md
 * @module @fsdp-ts/collectives
 */
export { type AllocateSharedOptions, allocateShared } from './allocate-shared.js';
// Store, env:// contract and job-secret authentication: see README "Environment contract",
// "Rendezvous store" and "Security model".
export {
  type AuthenticateSocketOptions,
  authenticateSocket,
  type HandshakeRole,
  type SessionKeys,
} from './auth/authenticate-socket.js';
export {
  generateJobSecret,
  MINIMUM_JOB_SECRET_LENGTH,
  resolveJobSecret,
  validateJobSecret,
} from './auth/job-secret.js';
export {
  RESTART_SIGNAL,
  restartRequested,
  restartRequestedLocally,
} from './elastic/restart-request.js';
export {
  type ProcessEnvironment,
  readEnvironment,
  slurmDefaultMasterPort,
} from './environment/read-environment.js';
export { expandSlurmNodelist } from './environment/slurm-nodelist.js';
export {
  isLoopback,
  localAddressRoutingTo,
  resolveSocketAddress,
  type SocketAddressOptions,
} from './environment/socket-address.js';
export { CollectiveError, type CollectiveErrorCode, type CollectiveErrorDetails } from './errors.js';
export {
  DEFAULT_TIMEOUT_MS,
  defaultProcessGroup,
  type InitProcessGroupOptions,
  initProcessGroup,
  newGroup,
} from './init-process-group.js';
export { fsdpRunCommand } from './launcher/fsdp-run-command.js';
export { type FailureAgreement, failureFingerprint, ProcessGroup } from './process-group.js';
export {
  type SpawnThreadRanksOptions,
  spawnThreadRanks,
  type ThreadRankArguments,
} from './spawn-thread-ranks.js';
export { openRendezvousStore, type RendezvousStore } from './store/open-rendezvous-store.js';
export { PrefixStore } from './store/prefix-store.js';
export type { Store, StoreWaitOptions } from './store/store.js';
export { type ConnectStoreOptions, connectStore, StoreClient } from './store/store-client.js';
export { type StoreServer, type StoreServerOptions, startStoreServer } from './store/store-server.js';
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
