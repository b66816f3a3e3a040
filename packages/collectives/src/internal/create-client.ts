import { CollectiveError } from '../errors.js';
import type { Store } from '../store/store.js';
import type { Backend } from '../types.js';
import { CommunicationClient } from './communication-client.js';
import { createControl } from './shm/shm-control.js';
import { joinShmGroup, type ThreadRankContext } from './shm/thread-rank-context.js';

/** Everything needed to bring up one group's communication worker on this rank. */
export interface GroupSetup {
  backend: Backend;
  rank: number;
  size: number;
  /** Unique name of the group: store key prefix (tcp) or broker key (shm). */
  key: string;
  /** World rank of each group rank. */
  worldRanks: number[];
  timeoutMs: number;
  store: Store | undefined;
  secret: string | undefined;
  /** Address the tcp data sockets listen on (and peers connect to). */
  host: string;
  thread: ThreadRankContext | undefined;
}

export async function createClient(setup: GroupSetup): Promise<CommunicationClient> {
  const abort = new Int32Array(new SharedArrayBuffer(4));
  if (setup.backend === 'shm') {
    let control: Int32Array;
    let ports: (import('node:worker_threads').MessagePort | null)[];
    if (setup.size === 1 && setup.thread === undefined) {
      control = createControl(1);
      ports = [null];
    } else {
      if (setup.thread === undefined) {
        throw new CollectiveError(
          `The shm backend with ${setup.size} ranks needs rank threads started by spawnThreadRanks.`,
          {
            code: 'invalid-argument',
            rank: setup.rank,
            fix: "start the ranks with spawnThreadRanks(size, moduleUrl, exportName), or use backend 'tcp' for processes.",
          },
        );
      }
      const reply = await joinShmGroup(setup.thread, setup.key, setup.worldRanks, setup.timeoutMs);
      control = reply.control;
      ports = reply.ports;
    }
    const init = { backend: 'shm' as const, rank: setup.rank, size: setup.size, control, ports, abort };
    const transfer = ports.filter((port) => port !== null);
    const { client } = await CommunicationClient.start(init, transfer, 'ready', setup.timeoutMs);
    client.markReady();
    return client;
  }
  if (setup.size > 1 && (setup.store === undefined || setup.secret === undefined)) {
    throw new CollectiveError(`The tcp backend with ${setup.size} ranks needs a store and a job secret.`, {
      code: 'invalid-argument',
      rank: setup.rank,
      expected: 'store and secret',
      actual: { store: setup.store !== undefined, secret: setup.secret !== undefined },
      fix: 'run under fsdp-run (which sets MASTER_ADDR, MASTER_PORT and FSDP_JOB_SECRET), or pass { store, secret }.',
    });
  }
  const init = {
    backend: 'tcp' as const,
    rank: setup.rank,
    size: setup.size,
    key: setup.key,
    secret: setup.secret ?? '',
    host: setup.host,
    timeoutMs: setup.timeoutMs,
    abort,
  };
  const { client, reply } = await CommunicationClient.start(init, [], 'listening', setup.timeoutMs);
  try {
    const endpoints: string[] = [];
    if (setup.size > 1) {
      const store = setup.store!;
      await store.set(`${setup.key}/endpoint/${setup.rank}`, `${setup.host}:${reply.port}`);
      const decoder = new TextDecoder();
      for (let peer = 0; peer < setup.size; peer++) {
        endpoints.push(
          peer === setup.rank
            ? ''
            : decoder.decode(
                await store.get(`${setup.key}/endpoint/${peer}`, { timeoutMs: setup.timeoutMs }),
              ),
        );
      }
    }
    const ready = client.expect('ready', setup.timeoutMs);
    client.post({ type: 'connect', endpoints });
    await ready;
    client.markReady();
    return client;
  } catch (error) {
    await client.destroy();
    throw error;
  }
}
