import { isMainThread, type MessagePort, workerData } from 'node:worker_threads';
import { CollectiveError } from '../../errors.js';
import type { SharedMemory } from './shm-arena.js';
import type { JoinReply, JoinRequest } from './shm-backend.js';

/** What spawnThreadRanks puts into each rank thread's workerData under `fsdpThreadRank`. */
export interface ThreadRankContext {
  rank: number;
  size: number;
  broker: MessagePort;
  /** [Note: shm arena]; null without shared wasm memory. */
  arena: SharedMemory | null;
}

export function threadRankContext(): ThreadRankContext | undefined {
  if (isMainThread) return undefined;
  const context = (workerData as { fsdpThreadRank?: ThreadRankContext } | null)?.fsdpThreadRank;
  return context;
}

const waiting = new Map<string, (reply: JoinReply) => void>();
let listening = false;

export function joinShmGroup(
  context: ThreadRankContext,
  key: string,
  members: number[],
  timeoutMs: number,
): Promise<JoinReply> {
  const broker = context.broker;
  if (!listening) {
    listening = true;
    broker.on('message', (reply: JoinReply) => {
      const resolve = waiting.get(reply.key);
      waiting.delete(reply.key);
      if (waiting.size === 0) broker.unref();
      resolve?.(reply);
    });
  }
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      waiting.delete(key);
      if (waiting.size === 0) broker.unref();
      reject(
        new CollectiveError(
          `Thread rank ${context.rank} waited ${timeoutMs} ms for the other members (${members.join(', ')}) of shm group '${key}'.`,
          {
            code: 'timeout',
            rank: context.rank,
            fix: 'every member rank must create the group (initProcessGroup / newGroup with the same ranks).',
          },
        ),
      );
    }, timeoutMs);
    waiting.set(key, (reply) => {
      clearTimeout(timer);
      resolve(reply);
    });
    broker.ref();
    const request: JoinRequest = { type: 'join', key, rank: context.rank, members };
    broker.postMessage(request);
  });
}
