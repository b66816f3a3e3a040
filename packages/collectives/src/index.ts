// @fsdp-ts/collectives: process groups (tcp, shm), Work handles, the rendezvous store and fsdp-run.
export { allocateShared } from './allocate-shared.js';
export { CollectiveError, type CollectiveErrorCode, type CollectiveErrorDetails } from './errors.js';
export {
  DEFAULT_TIMEOUT_MS,
  defaultProcessGroup,
  type InitProcessGroupOptions,
  initProcessGroup,
  newGroup,
} from './init-process-group.js';
export { ProcessGroup } from './process-group.js';
export {
  type SpawnThreadRanksOptions,
  spawnThreadRanks,
  type ThreadRankArguments,
} from './spawn-thread-ranks.js';
export type { Store, StoreWaitOptions } from './store/store.js';
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
