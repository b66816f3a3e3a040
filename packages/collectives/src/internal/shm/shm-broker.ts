import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { createControl } from './shm-control.js';

export interface JoinRequest {
  type: 'join';
  key: string;
  /** Rank in the world of threads. */
  rank: number;
  /** World ranks of the group's members, in group-rank order. */
  members: number[];
}

export interface JoinReply {
  type: 'joined';
  key: string;
  control: Int32Array;
  /** Indexed by group rank; null for the receiver itself. */
  ports: (MessagePort | null)[];
}

/**
 * Rendezvous for shm groups, living on the thread that spawned the ranks: once every member of a
 * group key has asked to join, it creates the group's control block and one MessageChannel per
 * pair of members, and hands each member its ends.
 */
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
