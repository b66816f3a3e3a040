import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { CollectiveError } from '../../errors.js';
import type { BackendDefinition } from '../backend-definition.js';
import { CommunicationClient } from '../communication-client.js';
import type { ShmInit } from './shm-engine.js';
import { createControl, doorbellSlot } from './shm-mailbox.js';
import { joinShmGroup, type ThreadRankContext, threadRankContext } from './thread-rank-context.js';

export interface ShmConfig {
  thread: ThreadRankContext | undefined;
}

/** shm: worker threads of one process (spawnThreadRanks) ([Note: shm control block]). */
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

export interface JoinRequest {
  type: 'join';
  key: string;
  rank: number;
  members: number[];
}

export interface JoinReply {
  type: 'joined';
  key: string;
  control: Int32Array;
  /** By group rank; null for the receiver. */
  ports: (MessagePort | null)[];
}

/** On the spawning thread: once every member joined, a control block and a MessageChannel per pair. */
export class ShmBroker {
  private readonly joining = new Map<string, Map<number, MessagePort>>();

  attach(port: MessagePort): void {
    port.on('message', (request: JoinRequest) => {
      if (request.type === 'join') this.join(request, port);
    });
    port.unref();
  }

  private join(request: JoinRequest, replyPort: MessagePort): void {
    const joined = this.joining.get(request.key) ?? new Map<number, MessagePort>();
    this.joining.set(request.key, joined);
    joined.set(request.rank, replyPort);
    if (joined.size < request.members.length) return;
    this.joining.delete(request.key);
    const size = request.members.length;
    const control = createControl(size);
    const ports: (MessagePort | null)[][] = request.members.map(() =>
      new Array<MessagePort | null>(size).fill(null),
    );
    for (let i = 0; i < size; i++) {
      for (let j = i + 1; j < size; j++) {
        const channel = new MessageChannel();
        ports[i]![j] = channel.port1;
        ports[j]![i] = channel.port2;
      }
    }
    request.members.forEach((member, index) => {
      const own = ports[index]!;
      const reply: JoinReply = { type: 'joined', key: request.key, control, ports: own };
      joined.get(member)!.postMessage(
        reply,
        own.filter((port): port is MessagePort => port !== null),
      );
    });
  }
}
