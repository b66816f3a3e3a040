import { type ForeignNames, type OptionKeys, optionKeysCheck } from '@fsdp-ts/errors';
import { CollectiveError } from '../errors.js';
import type { InitProcessGroupOptions } from '../init-process-group.js';
import type { BroadcastOptions, OpOptions, ReduceOptions, WireOptions } from '../types.js';

/** [Note: option keys] in @fsdp-ts/errors; main thread only, before the worker sees them. */
export const checkCollectiveOptionKeys = optionKeysCheck(
  (message, details) => new CollectiveError(message, { ...details, code: 'unknown-option' }),
);

const opKeys = { dtype: true, timeoutMs: true } as const satisfies OptionKeys<OpOptions>;
const wireKeys = { ...opKeys, wireDtype: true } as const satisfies OptionKeys<OpOptions & WireOptions>;
const reduceKeys = { ...wireKeys, op: true } as const satisfies OptionKeys<ReduceOptions>;
const broadcastKeys = { ...wireKeys, root: true } as const satisfies OptionKeys<BroadcastOptions>;

export const opOptionKeys = {
  allReduce: reduceKeys,
  allGather: wireKeys,
  reduceScatter: reduceKeys,
  broadcast: broadcastKeys,
  barrier: opKeys,
  send: opKeys,
  recv: opKeys,
} as const;

/** torch.distributed's op arguments, with what fsdp-ts calls them. */
export const torchOpNames: ForeignNames = {
  async_op: 'no such option: every op returns a Work at once; call work.wait() (or await it) to block',
  group: 'no such option: call the op on the group itself, group.allReduce(...)',
  src: "torch.distributed.broadcast's src is root here (a rank of this group)",
  dst: 'no such option: send(buffer, peer) takes the peer as its second argument',
  timeout: 'timeoutMs here, in milliseconds',
  reduceOp: "op here: 'sum' | 'avg' | 'max' | 'min'",
};

const initProcessGroupOptionKeys = {
  backend: true,
  rank: true,
  size: true,
  store: true,
  secret: true,
  host: true,
  secure: true,
  timeoutMs: true,
  name: true,
} as const satisfies OptionKeys<InitProcessGroupOptions>;

/** torch.distributed.init_process_group's arguments, with what fsdp-ts calls them. */
const pytorchInitNames: ForeignNames = {
  world_size: "PyTorch's world_size is size here (default: WORLD_SIZE)",
  worldSize: "PyTorch's world_size is size here (default: WORLD_SIZE)",
  init_method:
    'no such option: ranks meet through MASTER_ADDR:MASTER_PORT (env://, what fsdp-run sets) or a store you pass as store',
  timeout: "PyTorch's timeout is timeoutMs here, in milliseconds",
  group_name: "PyTorch's group_name is name here",
  pg_options: 'no equivalent; remove it',
  device_id: 'no equivalent: collectives move CPU buffers; remove it',
};

export function checkInitProcessGroupOptions(options: unknown): void {
  checkCollectiveOptionKeys('initProcessGroup', options, initProcessGroupOptionKeys, pytorchInitNames);
}
