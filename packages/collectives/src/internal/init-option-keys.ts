import type { ForeignNames, OptionKeys } from '@fsdp-ts/errors';
import type { InitProcessGroupOptions } from '../init-process-group.js';
import { checkCollectiveOptionKeys } from './check-option-keys.js';

// Beside init-process-group.ts rather than in it, which other work edits; the type check below
// ties this list to InitProcessGroupOptions all the same.
/** The keys of InitProcessGroupOptions ([Note: option keys] in @fsdp-ts/errors). */
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

/** Throws CollectiveError('unknown-option') for a key InitProcessGroupOptions does not declare. */
export function checkInitProcessGroupOptions(options: unknown): void {
  checkCollectiveOptionKeys('initProcessGroup', options, initProcessGroupOptionKeys, pytorchInitNames);
}
