import type { MessagePort } from 'node:worker_threads';
import { CollectiveError } from '../../errors.js';
import type { BackendDefinition } from '../backend-definition.js';
import { CommunicationClient } from '../communication-client.js';
import { createControl, doorbellSlot } from './shm-control.js';
import type { ShmInit } from './shm-engine.js';
import { joinShmGroup, type ThreadRankContext, threadRankContext } from './thread-rank-context.js';

/** The shm backend's settings: the rank thread's context (undefined for a lone rank). */
export interface ShmConfig {
  thread: ThreadRankContext | undefined;
}

/**
 * shm: ranks are worker threads of one process (spawnThreadRanks) sharing SharedArrayBuffers;
 * ops are computed in place in the peers' memory ([Note: shm control block]).
 */
export const shmBackend: BackendDefinition<ShmConfig> = {
  name: 'shm',

  async configure(_options, identity) {
    const thread = threadRankContext();
    if (identity.size > 1 && thread === undefined) {
      throw new CollectiveError(
        `The shm backend with ${identity.size} ranks needs rank threads started by spawnThreadRanks.`,
        {
          code: 'invalid-argument',
          rank: identity.rank,
          fix: "start the ranks with spawnThreadRanks(size, moduleUrl, exportName), or use backend 'tcp' for processes.",
        },
      );
    }
    return { thread };
  },

  async start(setup) {
    let control: Int32Array;
    let ports: (MessagePort | null)[];
    if (setup.size === 1 && setup.config.thread === undefined) {
      control = createControl(1);
      ports = [null];
    } else {
      const reply = await joinShmGroup(setup.config.thread!, setup.key, setup.worldRanks, setup.timeoutMs);
      control = reply.control;
      ports = reply.ports;
    }
    const abort = new Int32Array(new SharedArrayBuffer(4));
    const arena = setup.config.thread?.arena ?? null;
    const init: ShmInit = {
      backend: 'shm',
      rank: setup.rank,
      size: setup.size,
      control,
      ports,
      abort,
      arena,
    };
    const transfer = ports.filter((port) => port !== null);
    const { client } = await CommunicationClient.start(shmBackend, init, transfer, 'ready', setup.timeoutMs);
    client.markReady();
    return client;
  },

  loadEngine: () => import('./shm-engine.js'),

  abort(init) {
    const { control, rank } = init as ShmInit;
    Atomics.notify(control, doorbellSlot(rank));
  },
};
