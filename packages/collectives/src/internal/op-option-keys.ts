import type { ForeignNames, OptionKeys } from '@fsdp-ts/errors';
import type { BroadcastOptions, OpOptions, ReduceOptions, WireOptions } from '../types.js';

const opKeys = { dtype: true, timeoutMs: true } as const satisfies OptionKeys<OpOptions>;
const wireKeys = { ...opKeys, wireDtype: true } as const satisfies OptionKeys<OpOptions & WireOptions>;
const reduceKeys = { ...wireKeys, op: true } as const satisfies OptionKeys<ReduceOptions>;
const broadcastKeys = { ...wireKeys, root: true } as const satisfies OptionKeys<BroadcastOptions>;

/** The keys of each op's options ([Note: option keys] in @fsdp-ts/errors). */
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
